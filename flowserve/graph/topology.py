"""Topology of a query's graph: each node's depth, the longest path (in nodes) from it
to an output of the graph (Teola Alg. 2 runs the deepest, critical-path node first)."""

from __future__ import annotations

from collections.abc import Mapping

from flowserve.graph.nodes import Node


def depths(nodes: Mapping[str, Node]) -> dict[str, int]:
    """depth(n) = 1 + max depth of the nodes that depend on n; an output has depth 1."""
    users: dict[str, list[str]] = {k: [] for k in nodes}
    for n in nodes.values():
        for d in n.deps:
            if d in users:
                users[d].append(n.key)
    out: dict[str, int] = {}
    for root in nodes:
        if root in out:
            continue
        stack = [(root, False)]
        while stack:  # iterative post-order: graphs may be deep chains
            k, expanded = stack.pop()
            if k in out:
                continue
            if expanded:
                out[k] = 1 + max((out[u] for u in users[k]), default=0)
                continue
            stack.append((k, True))
            stack.extend((u, False) for u in users[k] if u not in out)
    return out
