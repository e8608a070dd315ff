"""Graph runtime of one query: a DAG that may grow while it runs.

The runtime calls the workflow's hooks, runs the graph passes on each batch they add,
checks the batch (unknown dependencies, duplicate keys, cycles: a bad expansion fails
its query instead of hanging it) and issues a node when all its dependencies finished.
It keeps the query's object store (every finished node's `NodeResult`) and resolves
`Out(step)` references in prompts and tool arguments when it issues a node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from flowserve.errors import WorkflowError
from flowserve.graph.nodes import LLMNode, Node, NodeResult, OpNode
from flowserve.graph.passes import GraphPass, PassContext
from flowserve.graph.primitives import PART, split_parts
from flowserve.graph.prompt import Out, Part
from flowserve.graph.topology import depths
from flowserve.graph.workflow import Graph, Workflow


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

    def __init__(self, workflow: Workflow, query_id: int = 0, passes: Sequence[GraphPass] = (),
                 batch_sizes: Mapping[str, int] | None = None) -> None:
        self.workflow = workflow
        self.query_id = query_id
        self.passes = tuple(passes)
        self.batch_sizes = dict(batch_sizes or {})
        self._streams: dict[str, dict[int, str]] = {}  # splittable step → part index → part node
        self._depths: tuple[int, dict[str, int]] = (-1, {})
        self.nodes: dict[str, Node] = {}
        self.results: dict[str, NodeResult] = {}
        self._missing: dict[str, int] = {}  # unfinished dependencies per pending node
        self._users: dict[str, list[str]] = {}
        self.issued: set[str] = set()
        self._graph = Graph(self.results)
        self.closed = not workflow.open_ended  # an open-ended query takes input until closed
        self._stage_calls: dict[str, int] = {}

    def start(self) -> list[Node]:
        """The nodes ready at once (resolved)."""
        self.workflow.start(self._graph)
        return self._add(self._graph.take())

    def input(self, data: object) -> list[Node]:
        """Input from outside (a program's next call): the steps it adds that are ready."""
        if self.closed and self.workflow.open_ended:
            raise WorkflowError(f"query {self.query_id} is closed: it takes no more input")
        self.workflow.on_input(self._graph, data)
        return self._add(self._graph.take())

    def close(self) -> list[Node]:
        """No more input: the query finishes once its steps did."""
        self.closed = True
        self.workflow.on_close(self._graph)
        return self._add(self._graph.take())

    def complete(self, key: str, result: NodeResult) -> list[Node]:
        """Record a finished node; returns the nodes that are ready to issue now. Parts of
        its output not streamed yet are completed from the whole output."""
        ready = self._record(key, result)
        for index, part in sorted(self._streams.pop(key, {}).items()):
            self.issued.add(part)
            ready += self._record(part, _part_of(result, index, self.nodes[part].args.get("of", 1)))  # type: ignore[union-attr]
        return ready

    def progress(self, key: str, index: int, result: NodeResult) -> list[Node]:
        """Part `index` of a running splittable step's output is complete (decode
        pipelining): finish its streamed part node now."""
        part = self._streams.get(key, {}).pop(index, None)
        if part is None or key in self.results:
            return []
        self.issued.add(part)
        return self._record(part, result)

    def depth(self, key: str) -> int:
        """Longest path from `key` to an output of the graph known so far (Teola's depth)."""
        if self._depths[0] != len(self.nodes):
            self._depths = (len(self.nodes), depths(self.nodes))
        return self._depths[1].get(key, 0)

    def _record(self, key: str, result: NodeResult) -> list[Node]:
        assert key in self.issued and key not in self.results, key
        self.results[key] = result
        ready = []
        for u in self._users.pop(key, ()):
            self._missing[u] -= 1
            if self._missing[u] == 0:
                del self._missing[u]
                ready.append(self._ready(self.nodes[u]))
        self.workflow.on_done(self._graph, key, result)
        return ready + self._add(self._graph.take())

    def _add(self, new: Sequence[Node]) -> list[Node]:
        if not new:
            return []
        if self.passes:
            ctx = PassContext(self.nodes, self.results, self.batch_sizes)
            for p in self.passes:
                new = p(new, ctx)
        ordered = topological_order(new, set(self.nodes))
        ready = []
        for n in ordered:
            self.nodes[n.key] = n
            if isinstance(n, LLMNode) and n.kind == "llm":
                self._stage_calls[n.stage] = self._stage_calls.get(n.stage, 0) + 1
            source = _streamed_source(n)
            if source is not None and source not in self.results:
                self._streams.setdefault(source, {})[int(n.args.get("index", 0))] = n.key  # type: ignore[union-attr]
                continue
            missing = [d for d in n.deps if d not in self.results]
            if missing:
                self._missing[n.key] = len(missing)
                for d in missing:
                    self._users.setdefault(d, []).append(n.key)
            else:
                ready.append(self._ready(n))
        return ready

    def _ready(self, n: Node) -> Node:
        """Issue a node: its `Out` references become the producers' outputs (the graph
        keeps the issued, resolved node)."""
        self.issued.add(n.key)
        if not n.refs:
            return n
        if isinstance(n, LLMNode):
            parts: list[Part] = []
            for p in n.prompt:
                parts.extend(self._output(p.step) if isinstance(p, Out) else (p,))
            n = dataclasses.replace(n, prompt=tuple(parts))
        else:
            args = {k: (self._value(v.step) if isinstance(v, Out) else v) for k, v in n.args.items()}
            n = dataclasses.replace(n, args=args)
        self.nodes[n.key] = n
        return n

    def _output(self, step: str) -> tuple[Part, ...]:
        return self.results[step].parts(self.query_id, step)

    def _value(self, step: str) -> object:
        r = self.results[step]
        return r.text if r.text is not None else r.value

    def streams_parts(self, key: str) -> bool:
        """Whether step `key` hands its output on part by part (decode pipelining)."""
        return bool(self._streams.get(key))

    @property
    def streams(self) -> bool:
        """Whether some running step hands its output on part by part."""
        return bool(self._streams)

    @property
    def finished(self) -> bool:
        """Every node finished, the workflow added nothing more and takes no more input."""
        return self.closed and len(self.results) == len(self.nodes)

    @property
    def calls_by_stage(self) -> Mapping[str, int]:
        """LLM calls in the graph so far, per stage (what learned stage priors condition on)."""
        return self._stage_calls

    @property
    def outstanding(self) -> int:
        return len(self.nodes) - len(self.results)


def _streamed_source(n: Node) -> str | None:
    if isinstance(n, OpNode) and n.op == PART and n.args.get("stream") and n.refs:
        return n.refs[0]
    return None


def _part_of(whole: NodeResult, index: int, of: int) -> NodeResult:
    """Part `index` of a finished output: its line live, an even share of its tokens
    simulated."""
    if whole.error is not None:
        return NodeResult(error=whole.error, finished=whole.finished)
    if whole.text is not None:
        items = split_parts(whole.text)
        return NodeResult(text=items[index] if index < len(items) else "", finished=whole.finished)
    return NodeResult(output_tokens=max(1, whole.output_tokens // max(of, 1)), finished=whole.finished)
