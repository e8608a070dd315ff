"""The radix tree against a brute-force reference (a set of stored token prefixes)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.cache.radix import RadixTree, common_prefix_len

seqs = st.lists(st.integers(0, 3), min_size=1, max_size=12).map(tuple)


def lcp(a, b):
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def prefixes(seq):
    return {seq[:i] for i in range(1, len(seq) + 1)}


@given(st.lists(seqs, max_size=25), st.lists(seqs, max_size=10))
def test_match_and_size_against_brute_force(inserted, queries):
    tree = RadixTree()
    stored: set[tuple[int, ...]] = set()
    for t, s in enumerate(inserted):
        _, new = tree.insert(s, float(t))
        assert new == len(prefixes(s) - stored)
        stored |= prefixes(s)
        assert tree.size == len(stored)
    for q in queries + inserted:
        expect = max((lcp(q, s) for s in inserted), default=0)
        assert tree.match_length(q) == expect
        node = tree.match(q, 100.0)  # splits so that the node ends at the match
        assert node.depth == expect
        assert tree.path_tokens(node) == q[:expect]
    assert tree.size == len(stored)  # splitting never changes the content


@settings(max_examples=150)
@given(st.lists(seqs, min_size=1, max_size=20), st.lists(st.booleans(), max_size=20),
       st.integers(1, 40))
def test_eviction_is_lru_and_spares_referenced(inserted, lock_flags, budget):
    tree = RadixTree()
    locked = []
    for t, s in enumerate(inserted):
        node, _ = tree.insert(s, float(t))
        if t < len(lock_flags) and lock_flags[t]:
            tree.acquire(node, owner="seq")
            locked.append(s)
    stored = set()
    for s in inserted:
        stored |= prefixes(s)
    evicted_paths = []

    def on_evict(node):
        # a node is evicted only as an unreferenced leaf, least recently used first
        assert not node.children and node.lock == 0
        leaves = [n for n in tree.nodes() if not n.children and n.lock == 0]
        assert node.last_access == min(n.last_access for n in leaves)
        evicted_paths.append((tree.path_tokens(node), len(node.key)))

    before = tree.size
    freed = tree.evict(budget, on_evict)
    assert freed == before - tree.size
    assert freed >= budget or tree.evictable_size == 0
    for path, k in evicted_paths:
        for i in range(len(path) - k + 1, len(path) + 1):
            stored.discard(path[:i])
    assert tree.size == len(stored)
    for s in locked:  # referenced sequences survive whole
        assert tree.match_length(s) == len(s)
    assert tree.locked_size == sum(len(n.key) for n in tree.nodes() if n.lock)


def test_release_makes_evictable_and_refs_are_per_owner():
    tree = RadixTree()
    a, _ = tree.insert((1, 2, 3, 4), 0.0)
    tree.acquire(a, "x")
    tree.acquire(a, "y")
    assert tree.evict(100) == 0
    tree.release(a, "x")
    assert a.refs == {"y": 1}
    assert tree.evict(100) == 0
    tree.release(a, "y")
    assert tree.evictable_size == 4
    assert tree.evict(1) == 4  # whole nodes go
    assert tree.size == 0


def test_touch_on_match_changes_lru_order():
    tree = RadixTree()
    tree.insert((1, 1, 1), 0.0)
    tree.insert((2, 2, 2), 1.0)
    tree.match((1, 1, 1), 5.0)  # (1,1,1) is now the most recently used
    order = []
    tree.evict(3, lambda n: order.append(tree.path_tokens(n)))
    assert order == [(2, 2, 2)]


def test_common_prefix_len():
    key = tuple(range(100))
    assert common_prefix_len(key, key, 0) == 100
    assert common_prefix_len(key, (*range(37), -1), 0) == 37
    assert common_prefix_len(key, (9, 0, 1, 2), 1) == 3
    assert common_prefix_len(key, (5,), 0) == 0


@given(st.lists(seqs, min_size=1, max_size=15), seqs)
def test_insert_from_a_matched_node_equals_a_full_insert(inserted, extra):
    a, b = RadixTree(), RadixTree()
    for t, s in enumerate(inserted):
        a.insert(s, float(t))
        b.insert(s, float(t))
    query = inserted[0] + extra
    start = b.match(query, 50.0)  # a prefix of `query` the tree holds
    node_a, new_a = a.insert(query, 60.0)
    node_b, new_b = b.insert(query, 60.0, start)
    assert (new_a, node_a.depth, a.size) == (new_b, node_b.depth, b.size)
    assert b.path_tokens(node_b) == query
    n = start
    while n is not b.root:  # the prefix path was touched as a full walk would
        assert n.last_access == 60.0
        n = n.parent
