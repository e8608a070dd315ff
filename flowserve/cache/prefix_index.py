"""The router's view of which instance caches which prefix.

A radix tree whose nodes carry the set of instances holding them. Presence is kept
path-closed: an instance that holds a node holds all its ancestors, because it is added
along the whole path on insert and removed only from suffixes on eviction. The
simulator feeds it the engines' real evictions; a live gateway can only estimate them.
"""

from __future__ import annotations

from typing import Any

from flowserve.cache.radix import RadixNode, RadixTree
from flowserve.types import Tokens


class PrefixIndex(RadixTree):
    def _new_node(self, key: Tokens, parent: RadixNode, now: float) -> RadixNode:
        node = super()._new_node(key, parent, now)
        node.data = set()
        return node

    def _copy_data(self, data: Any) -> Any:
        return set(data)

    def add(self, tokens: Tokens, instance: str, now: float) -> RadixNode:
        """Record that `instance` caches all of `tokens`."""
        node, _ = self.insert(tokens, now)
        n: RadixNode | None = node
        while n is not None and n is not self.root and instance not in n.data:
            n.data.add(instance)
            n = n.parent
        return node

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

    def discard(self, instance: str, tokens: Tokens, start: int) -> None:
        """`instance` no longer caches tokens[start:] (nor anything below it)."""
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
        while stack:
            n = stack.pop()
            n.data.discard(instance)
            order.append(n)
            stack.extend(n.children.values())
        for n in reversed(order):  # children before parents
            self._drop_if_unused(n)
        while up is not None and up is not self.root:
            up = self._drop_if_unused(up)

    def _drop_if_unused(self, n: RadixNode) -> RadixNode | None:
        parent = n.parent
        if parent is None or n.children or n.data or n.lock:
            return None
        self._remove_leaf(n)
        return parent

    def remove_instance(self, instance: str) -> None:
        for n in self.nodes():
            n.data.discard(instance)
        self.collect()

    def collect(self) -> int:
        """Drop leaves no instance holds and nobody references; returns tokens freed."""
        freed = 0
        stack = [n for n in self.nodes() if not n.children]
        while stack:
            n = stack.pop()
            parent = n.parent
            if parent is None or n.children or n.data or n.lock:
                continue
            freed += self._remove_leaf(n)
            if parent is not self.root:
                stack.append(parent)
        return freed
