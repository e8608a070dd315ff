"""The router's view of which instance caches which prefix, and who used it lately.

A radix tree whose nodes carry the set of instances holding them (`node.data`). Presence
is kept path-closed: an instance that holds a node holds all its ancestors, because it
is added along the whole path on insert and removed only from suffixes on eviction. The
simulator feeds it the engines' real evictions; a live gateway can only estimate them.

Per node it also keeps the request history Preble's E2 reads (§4.2): the times of the
requests routed to each instance that used the node within the window `window_s`, and
the last use (`last_access`). Per instance it keeps the LRU order of the nodes it holds
(oldest first; a node is always older than its ancestors there, so walking the order
from the front visits leaves first, as an engine's LRU eviction would) and their token
count. A node no instance holds any more is garbage-collected once no request has used
it for a window.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict, deque
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from flowserve.cache.radix import RadixNode, RadixTree
from flowserve.types.work import Tokens

DEFAULT_WINDOW_S = 180.0  # Preble's history window H (3 min)


class PrefixReader(Protocol):
    """What policies may ask of the router's index (`ClusterView.prefix_index`): reads only."""

    window_s: float
    cached_tokens: Mapping[str, int]

    def match_by_instance(self, tokens: Tokens) -> tuple[int, dict[str, int]]: ...

    def match_path(self, tokens: Tokens) -> tuple[list[RadixNode], RadixNode | None, int]: ...

    def requests(self, node: RadixNode, instance: str, now: float) -> int: ...

    def lru_nodes(self, instance: str) -> Iterator[RadixNode]: ...

    def path_tokens(self, node: RadixNode) -> Tokens: ...


class PrefixNode(RadixNode):
    __slots__ = ("hits",)

    def __init__(self, key: Tokens, parent: RadixNode | None, depth: int, now: float) -> None:
        super().__init__(key, parent, depth, now)
        self.data = set()  # the instances that cache it
        self.hits: dict[str, list[float]] | None = None  # instance → request times (sorted)

    def hit(self, instance: str, now: float, horizon: float) -> None:
        """A request routed to `instance` used this node at `now` (times before `horizon` go)."""
        hits = self.hits
        if hits is None:
            self.hits = {instance: [now]}
            return
        times = hits.get(instance)
        if times is None:
            hits[instance] = [now]
        else:
            times.append(now)
            if times[0] < horizon:
                del times[: bisect_left(times, horizon)]

    def inherit_hits(self, lower: PrefixNode) -> None:
        """Split off above `lower`: every request that used it used this part too."""
        if lower.hits:
            self.hits = {i: list(t) for i, t in lower.hits.items()}


class PrefixIndex(RadixTree):
    def __init__(self, window_s: float = DEFAULT_WINDOW_S) -> None:
        super().__init__()
        assert window_s >= 0
        self.window_s = window_s
        self.now = 0.0
        self.lru: dict[str, OrderedDict[RadixNode, None]] = {}
        self.cached_tokens: dict[str, int] = {}
        self._orphans: deque[RadixNode] = deque()  # lost their last instance, maybe still used
        # The router matches a prompt, then the core adds it: the second walk reuses the
        # first while the tree keeps its shape (`RadixTree.version`).
        self._memo: tuple[Tokens, int, tuple[RadixNode, int, RadixNode | None, int]] | None = None

    # ------------------------------------------------------------------ tree hooks

    def _walk(self, tokens: Tokens, now: float | None) -> tuple[RadixNode, int, RadixNode | None, int]:
        memo = self._memo
        if memo is not None and memo[0] is tokens and memo[1] == self.version:
            found = memo[2]
            if now is not None:  # the touches a fresh walk would make
                n: RadixNode | None = found[0]
                while n is not None and n is not self.root:
                    n.touch(now)
                    n = n.parent
                if found[2] is not None:
                    found[2].touch(now)
            return found
        found = super()._walk(tokens, now)
        self._memo = (tokens, self.version, found)
        return found

    def _new_node(self, key: Tokens, parent: RadixNode, now: float) -> RadixNode:
        return PrefixNode(key, parent, parent.depth + len(key), now)

    def _copy_data(self, data: Any) -> Any:
        return set(data)

    def _push_lru(self, node: RadixNode) -> None:
        pass  # the index never evicts by its own LRU: engines report what they evict

    def _split(self, child: RadixNode, j: int) -> RadixNode:
        upper = super()._split(child, j)
        upper.inherit_hits(child)
        for inst in upper.data:
            self.lru[inst][upper] = None  # tokens unchanged: the child's edge shrank by j
        return upper

    # ------------------------------------------------------------------ updates

    def add(self, tokens: Tokens, instance: str, now: float, count: bool = True) -> RadixNode:
        """Record that `instance` caches all of `tokens`; with `count`, also that a request
        routed to `instance` used every node of the path at `now`."""
        self.now = max(self.now, now)
        if self._orphans:
            self._collect_orphans()
        node, _ = self.insert(tokens, now)
        lru = self.lru.get(instance)
        if lru is None:
            lru = self.lru[instance] = OrderedDict()
            self.cached_tokens[instance] = 0
        horizon = now - self.window_s
        n: RadixNode | None = node
        root = self.root
        while n is not None and n is not root:
            if instance in n.data:
                lru.move_to_end(n)
            else:
                n.data.add(instance)
                lru[n] = None
                self.cached_tokens[instance] += len(n.key)
            if count:
                n.hit(instance, now, horizon)
            n = n.parent
        return node

    def discard(self, instance: str, tokens: Tokens, start: int, now: float | None = None) -> None:
        """`instance` no longer caches tokens[start:] (nor anything below it)."""
        if now is not None:
            self.now = max(self.now, now)
        node, pos, child, j = self._walk(tokens[:start], None)
        if pos == start:
            target = node.children.get(tokens[start]) if start < len(tokens) else None
        elif child is not None and pos + j == start:
            self._split(child, j)
            target = child  # the lower half now begins exactly at `start`
        else:
            return  # the tree diverges from `tokens` before `start`: nothing cached there
        if target is None:
            return
        up = target.parent
        order, stack = [], [target]
        lru = self.lru.get(instance)
        while stack:
            n = stack.pop()
            if instance in n.data:
                n.data.discard(instance)
                if lru is not None:
                    del lru[n]
                    self.cached_tokens[instance] -= len(n.key)
            order.append(n)
            stack.extend(n.children.values())
        for n in reversed(order):  # children before parents
            self._drop_if_unused(n)
        while up is not None and up is not self.root:
            up = self._drop_if_unused(up)

    def _drop_if_unused(self, n: RadixNode) -> RadixNode | None:
        """Remove n if it is a leaf no instance holds, nobody references, and no request
        used within the window (then it waits as an orphan); returns its parent if removed."""
        parent = n.parent
        if parent is None or n.children or n.data or n.lock:
            return None
        if n.last_access > self.now - self.window_s:
            self._orphans.append(n)
            return None
        self._remove_leaf(n)
        return parent

    def _collect_orphans(self) -> None:
        horizon = self.now - self.window_s
        orphans = self._orphans
        while orphans and orphans[0].last_access <= horizon:
            up: RadixNode | None = orphans.popleft()
            while up is not None and up is not self.root:
                up = self._drop_if_unused(up)
        # orphans are queued in time order of their last use, except re-used ones, which
        # are skipped above once they expire again (or hold an instance again)

    def remove_instance(self, instance: str) -> None:
        for n in self.nodes():
            n.data.discard(instance)
        self.lru.pop(instance, None)
        self.cached_tokens.pop(instance, None)
        self.collect()

    def collect(self, now: float | None = None) -> int:
        """Drop leaves no instance holds, nobody references and no request used within the
        window; returns tokens freed."""
        if now is not None:
            self.now = max(self.now, now)
        horizon = self.now - self.window_s
        freed = 0
        stack = [n for n in self.nodes() if not n.children]
        while stack:
            n = stack.pop()
            parent = n.parent
            if parent is None or n.children or n.data or n.lock or n.last_access > horizon:
                continue
            freed += self._remove_leaf(n)
            if parent is not self.root:
                stack.append(parent)
        return freed

    # ------------------------------------------------------------------ queries

    def match_by_instance(self, tokens: Tokens) -> tuple[int, dict[str, int]]:
        """(longest prefix known anywhere, longest prefix cached per instance)."""
        node, pos, child, j = self._walk(tokens, None)
        best: dict[str, int] = {}
        n: RadixNode | None = node
        while n is not None and n is not self.root:
            for inst in n.data:
                best.setdefault(inst, n.depth)
            n = n.parent
        if child is not None and j:
            for inst in child.data:
                best[inst] = pos + j
        return pos + j, best

    def match_path(self, tokens: Tokens) -> tuple[list[RadixNode], RadixNode | None, int]:
        """The fully matched nodes of `tokens` root-first, the partially matched child
        (or None) and how many of its tokens match. Touches nothing."""
        node, _, child, j = self._walk(tokens, None)
        path = []
        n: RadixNode | None = node
        while n is not None and n is not self.root:
            path.append(n)
            n = n.parent
        path.reverse()
        return path, (child if j else None), j

    def requests(self, node: RadixNode, instance: str, now: float) -> int:
        """Requests routed to `instance` that used `node` within the window before `now`."""
        hits = node.hits  # type: ignore[attr-defined]  # every node of the index is a PrefixNode
        times = hits.get(instance) if hits else None
        if not times:
            return 0
        return len(times) - bisect_left(times, now - self.window_s)

    def lru_nodes(self, instance: str) -> Iterator[RadixNode]:
        """Nodes `instance` holds, least recently used first (leaves before ancestors)."""
        return iter(self.lru.get(instance, ()))
