"""Edge-compressed radix tree over token ids: the prefix cache of an engine, and the base
of the router's global prefix index.

* `match` finds the longest cached prefix; `insert` adds a sequence and says how many of
  its tokens were new.
* References are counted per owner (an engine's running sequences, or an instance in the
  router's index); a node is locked while any owner references it or a descendant, since
  `acquire` counts along the whole path to the root.
* `evict` frees unreferenced leaves in least-recently-used order.

Edges are token tuples, so matching compares slices in C rather than token by token.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from flowserve.types.work import Tokens


class RadixNode:
    __slots__ = ("children", "data", "depth", "key", "last_access", "lock", "parent", "refs")

    def __init__(self, key: Tokens, parent: RadixNode | None, depth: int, now: float) -> None:
        self.key = key
        self.parent = parent
        self.depth = depth  # tokens from the root to the end of this node
        self.children: dict[int, RadixNode] = {}
        self.refs: dict[Hashable, int] = {}
        self.lock = 0  # Σ refs over owners
        self.last_access = now
        self.data: Any = None  # owned by subclasses (e.g. which instances cache the node)

    def touch(self, now: float) -> None:
        """Used now (LRU order)."""
        self.last_access = now

    def hold(self, owner: Hashable) -> bool:
        """One more reference by `owner`; whether the node was unlocked before."""
        was_free = self.lock == 0
        self.lock += 1
        self.refs[owner] = self.refs.get(owner, 0) + 1
        return was_free

    def unhold(self, owner: Hashable) -> bool:
        """One reference fewer by `owner`; whether the node is unlocked now."""
        count = self.refs[owner] - 1
        if count < 0:
            raise ValueError("release without acquire")
        if count:
            self.refs[owner] = count
        else:
            del self.refs[owner]
        self.lock -= 1
        return self.lock == 0

    def take_over(self, lower: RadixNode, data: Any) -> None:
        """A node made by splitting `lower`'s edge above it: it carries `lower`'s references,
        lock and (a copy of) its data, and `lower` hangs below it by the rest of its edge."""
        self.refs = dict(lower.refs)
        self.lock = lower.lock
        self.data = data
        lower.hang_below(self)
        self.children[lower.key[0]] = lower

    def hang_below(self, upper: RadixNode) -> None:
        """Its edge was cut: `upper` holds the first part of its key, it keeps the rest."""
        self.key = self.key[len(upper.key):]
        self.parent = upper

    def detach(self) -> None:
        """Removed from the tree (evicted)."""
        self.parent = None

    def __repr__(self) -> str:
        return f"RadixNode(depth={self.depth}, len={len(self.key)}, lock={self.lock})"


def common_prefix_len(key: Tokens, tokens: Tokens, pos: int) -> int:
    """Length of the common prefix of `key` and `tokens[pos:]` (slice compares, C speed)."""
    hi = min(len(key), len(tokens) - pos)
    if hi <= 0 or key[0] != tokens[pos]:
        return 0
    if key[:hi] == tokens[pos : pos + hi]:
        return hi
    lo = 1  # key[:lo] matches, key[:hi] does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if key[:mid] == tokens[pos : pos + mid]:
            lo = mid
        else:
            hi = mid
    return lo


class RadixTree:
    def __init__(self) -> None:
        self.root = RadixNode((), None, 0, 0.0)
        self.size = 0  # tokens stored
        self.version = 0  # bumps on every change of the tree's shape (a node added, split, removed)
        self.locked_size = 0  # tokens in nodes with lock > 0
        self._lru: list[tuple[float, int, RadixNode]] = []
        self._seq = itertools.count()

    # ------------------------------------------------------------------ lookup

    @property
    def evictable_size(self) -> int:
        return self.size - self.locked_size

    def _walk(self, tokens: Tokens, now: float | None) -> tuple[RadixNode, int, RadixNode | None, int]:
        """Follow `tokens`: (deepest fully matched node, its depth, partial child, partial len)."""
        return self._walk_from(self.root, tokens, now)

    def _walk_from(self, node: RadixNode, tokens: Tokens,
                   now: float | None) -> tuple[RadixNode, int, RadixNode | None, int]:
        pos, n = node.depth, len(tokens)
        while pos < n:
            child = node.children.get(tokens[pos])
            if child is None:
                break
            key = child.key
            k = len(key)
            if tokens[pos : pos + k] == key:
                node = child
                pos += k
                if now is not None:
                    child.touch(now)
                continue
            j = common_prefix_len(key, tokens, pos)
            if now is not None:
                child.touch(now)
            return node, pos, child, j
        return node, pos, None, 0

    def match_length(self, tokens: Tokens) -> int:
        """Longest cached prefix of `tokens`, without touching LRU order."""
        _, pos, _, j = self._walk(tokens, None)
        return pos + j

    def match(self, tokens: Tokens, now: float) -> RadixNode:
        """Node whose path is the longest cached prefix of `tokens` (splits an edge if the
        match ends inside it, so the returned node's depth is the match length)."""
        node, _, child, j = self._walk(tokens, now)
        if child is not None and j > 0:
            node = self._split(child, j)
        return node

    # ------------------------------------------------------------------ update

    def insert(self, tokens: Tokens, now: float, start: RadixNode | None = None) -> tuple[RadixNode, int]:
        """Add `tokens`; returns (node at depth len(tokens), number of new tokens).

        `start`: a node known to hold a prefix of `tokens` (e.g. a match made while the
        tree kept its shape); the walk begins there, touching its ancestors for LRU."""
        if start is None or start is self.root:
            node, pos, child, j = self._walk(tokens, now)
        else:
            up: RadixNode | None = start
            while up is not None and up is not self.root:
                up.touch(now)
                up = up.parent
            node, pos, child, j = self._walk_from(start, tokens, now)
        if child is not None and j > 0:
            node = self._split(child, j)
            pos += j
        if pos == len(tokens):
            return node, 0
        leaf = self._new_node(tokens[pos:], node, now)
        node.children[tokens[pos]] = leaf
        self.size += len(leaf.key)
        self.version += 1
        self._push_lru(leaf)
        return leaf, len(leaf.key)

    def _new_node(self, key: Tokens, parent: RadixNode, now: float) -> RadixNode:
        return RadixNode(key, parent, parent.depth + len(key), now)

    def _split(self, child: RadixNode, j: int) -> RadixNode:
        """Cut child's edge after j tokens; the new upper node inherits refs, lock, data."""
        parent = child.parent
        assert parent is not None and 0 < j < len(child.key)
        self.version += 1
        upper = self._new_node(child.key[:j], parent, child.last_access)
        parent.children[child.key[0]] = upper
        upper.take_over(child, self._copy_data(child.data))
        return upper

    def _copy_data(self, data: Any) -> Any:
        return data

    # ------------------------------------------------------------------ references

    def acquire(self, node: RadixNode, owner: Hashable = 0) -> None:
        """Reference node (and so its whole path) on behalf of `owner`."""
        n: RadixNode | None = node
        while n is not None and n is not self.root:
            if n.hold(owner):
                self.locked_size += len(n.key)
            n = n.parent

    def release(self, node: RadixNode, owner: Hashable = 0) -> None:
        n: RadixNode | None = node
        while n is not None and n is not self.root:
            if n.unhold(owner):
                self.locked_size -= len(n.key)
                if not n.children:
                    self._push_lru(n)
            n = n.parent

    # ------------------------------------------------------------------ eviction

    def _push_lru(self, node: RadixNode) -> None:
        heapq.heappush(self._lru, (node.last_access, next(self._seq), node))

    def evict(
        self, n_tokens: int, on_evict: Callable[[RadixNode], None] | None = None
    ) -> int:
        """Remove unreferenced leaves, least recently used first, until `n_tokens` are
        freed or nothing is evictable. Returns the tokens freed."""
        freed = 0
        while freed < n_tokens and self._lru:
            stamp, _, node = heapq.heappop(self._lru)
            if node.parent is None or node.children or node.lock:
                continue  # removed, no longer a leaf, or in use again
            if stamp != node.last_access:
                self._push_lru(node)  # touched since it was queued
                continue
            if on_evict is not None:
                on_evict(node)
            freed += self._remove_leaf(node)
        return freed

    def _remove_leaf(self, node: RadixNode) -> int:
        parent = node.parent
        assert parent is not None and not node.children and node.lock == 0
        self.version += 1
        del parent.children[node.key[0]]
        node.detach()
        self.size -= len(node.key)
        if parent is not self.root and not parent.children and parent.lock == 0:
            self._push_lru(parent)
        return len(node.key)

    # ------------------------------------------------------------------ inspection

    def path_tokens(self, node: RadixNode) -> Tokens:
        parts = []
        n: RadixNode | None = node
        while n is not None and n is not self.root:
            parts.append(n.key)
            n = n.parent
        return tuple(itertools.chain.from_iterable(reversed(parts)))

    def nodes(self) -> Iterator[RadixNode]:
        stack = list(self.root.children.values())
        while stack:
            n = stack.pop()
            yield n
            stack.extend(n.children.values())

    def __len__(self) -> int:
        return sum(1 for _ in self.nodes())
