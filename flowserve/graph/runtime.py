"""Graph runtime of one query: a DAG that may grow while it runs.

A node becomes ready when all its dependencies have finished. New nodes may depend on
any node already in the graph (finished or not) or on nodes added in the same batch; a
batch is checked for unknown dependencies, duplicate keys and cycles before anything of
it is accepted, so a bad expansion fails its query instead of hanging it.
"""

from __future__ import annotations

from collections.abc import Sequence

from flowserve.errors import WorkflowError
from flowserve.graph.nodes import Node, NodeResult
from flowserve.graph.program import WorkflowProgram


def topological_order(nodes: Sequence[Node], known: set[str]) -> list[Node]:
    """Order a batch so every node follows its in-batch dependencies (Kahn's algorithm).

    Raises WorkflowError on duplicate keys, dependencies on unknown nodes, or a cycle.
    """
    batch = {n.key: n for n in nodes}
    if len(batch) != len(nodes) or not known.isdisjoint(batch):
        keys = [n.key for n in nodes]
        dup = sorted({k for k in keys if keys.count(k) > 1 or k in known})
        raise WorkflowError(f"duplicate workflow node(s) {dup}")
    internal = False
    for n in nodes:
        for d in n.deps:
            if d in batch:
                internal = True
            elif d not in known:
                raise WorkflowError(f"workflow node {n.key!r} depends on unknown node {d!r}")
    if not internal:
        return list(nodes)  # nothing in the batch waits on the batch: no cycle possible
    indeg = dict.fromkeys(batch, 0)
    users: dict[str, list[str]] = {k: [] for k in batch}
    for n in nodes:
        for d in n.deps:
            if d in batch:
                indeg[n.key] += 1
                users[d].append(n.key)
    ready = [k for k, v in indeg.items() if v == 0]
    order: list[Node] = []
    while ready:
        k = ready.pop()
        order.append(batch[k])
        for u in users[k]:
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    if len(order) != len(batch):
        cyclic = sorted(k for k, v in indeg.items() if v > 0)
        raise WorkflowError(f"workflow graph has a cycle through nodes {cyclic}")
    return order


class QueryRun:
    """Runtime state of one query's graph."""

    def __init__(self, program: WorkflowProgram) -> None:
        self.program = program
        self.nodes: dict[str, Node] = {}
        self.results: dict[str, NodeResult] = {}
        self._missing: dict[str, int] = {}  # unfinished dependencies per pending node
        self._users: dict[str, list[str]] = {}
        self.issued: set[str] = set()

    def start(self) -> list[Node]:
        return self._add(self.program.start())

    def complete(self, key: str, result: NodeResult) -> list[Node]:
        """Record a finished node; returns the nodes that are ready to issue now."""
        assert key in self.issued and key not in self.results, key
        self.results[key] = result
        ready = []
        for u in self._users.pop(key, ()):
            self._missing[u] -= 1
            if self._missing[u] == 0:
                del self._missing[u]
                ready.append(self.nodes[u])
                self.issued.add(u)
        return ready + self._add(self.program.on_done(self.nodes[key], result))

    def _add(self, new: Sequence[Node]) -> list[Node]:
        ordered = topological_order(new, set(self.nodes))
        ready = []
        for n in ordered:
            self.nodes[n.key] = n
            missing = [d for d in n.deps if d not in self.results]
            if missing:
                self._missing[n.key] = len(missing)
                for d in missing:
                    self._users.setdefault(d, []).append(n.key)
            else:
                ready.append(n)
        for n in ready:
            self.issued.add(n.key)
        return ready

    @property
    def finished(self) -> bool:
        """Every node finished and the program added nothing more."""
        return len(self.results) == len(self.nodes)

    @property
    def outstanding(self) -> int:
        return len(self.nodes) - len(self.results)
