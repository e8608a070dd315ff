"""Graph runtime of one query: a DAG that may grow while it runs.

The runtime calls the workflow's hooks, runs the graph passes on each batch they add,
checks the batch (unknown dependencies, duplicate keys, cycles: a bad expansion fails
its query instead of hanging it) and issues a node when all its dependencies finished.
It keeps the query's object store (every finished node's `NodeResult`) and resolves
`Out(step)` references in prompts and tool arguments when it issues a node.

`part` nodes (item i of a splittable output) never go to a driver: the runtime takes
them from their source's output, as the source streams them (decode pipelining) or
when it finishes. A source may produce fewer parts than the workflow planned (an LLM
that writes two queries where three were asked, a search with fewer hits than top-k):
the parts beyond are *missing*, and so is every step that needs one (`Out.optional`),
so the fan-out shrinks to what exists — identically in the simulator and the gateway.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Mapping, Sequence

from flowserve.errors import WorkflowError
from flowserve.graph.nodes import LLMNode, Node, NodeResult, OpNode
from flowserve.graph.passes import GraphPass, PassContext
from flowserve.graph.primitives import PART, split_parts
from flowserve.graph.prompt import Out, Part, Segment, resolve
from flowserve.graph.topology import depths
from flowserve.graph.workflow import Graph, Workflow


def topological_order(nodes: Sequence[Node], known: Container[str]) -> list[Node]:
    """Order a batch so every node follows its in-batch dependencies (Kahn's algorithm).
    `known`: the keys of the nodes added before (a set or the graph's mapping).

    Raises WorkflowError on duplicate keys, dependencies on unknown nodes, or a cycle.
    """
    if len(nodes) == 1 and not nodes[0].deps and nodes[0].key not in known:
        return list(nodes)  # one node that waits on nothing: the common batch of a call
    batch = {n.key: n for n in nodes}
    if len(batch) != len(nodes) or any(k in known for k in batch):
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
        self._parts: dict[str, dict[int, str]] = {}  # unfinished source → part index → its pending part node
        self._early: dict[str, dict[int, NodeResult]] = {}  # parts reported before the source ended, unstreamed
        # sources that report their parts (simulated marks); key sets are dicts: a dict of
        # strings is not tracked by the garbage collector, a set always is
        self._reported: dict[str, None] = {}
        self._depths: tuple[int, dict[str, int]] = (-1, {})
        self.nodes: dict[str, Node] = {}
        self.results: dict[str, NodeResult] = {}
        self._missing: dict[str, int] = {}  # unfinished dependencies per pending node
        self._users: dict[str, list[str]] = {}
        self.issued: dict[str, None] = {}
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
        """Record a finished node; returns the nodes that are ready to issue now. Its
        parts not handed on yet are taken from the whole output (or found missing)."""
        ready = self._record(key, result)
        early = self._early.pop(key, {})
        reported = key in self._reported
        self._reported.pop(key, None)
        for index, part in sorted(self._parts.pop(key, {}).items()):
            self.issued[part] = None
            ready += self._record(part, early.get(index) or _take_part(self.nodes[part], result, reported))
        return ready

    def progress(self, key: str, index: int, result: NodeResult) -> list[Node]:
        """Part `index` of a running step's output is complete: a streamed part (decode
        pipelining) finishes now; another is kept until the step ends."""
        parts = self._parts.get(key)
        if parts is None or key in self.results:
            return []
        self._reported[key] = None
        part = parts.get(index)
        if part is None:
            return []
        if not self.nodes[part].args.get("stream"):  # type: ignore[union-attr]
            self._early.setdefault(key, {})[index] = result
            return []
        del parts[index]
        self.issued[part] = None
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
                ready += self._ready(self.nodes[u])
        self.workflow.on_done(self._graph, key, result)
        return ready + self._add(self._graph.take())

    def _add(self, new: Sequence[Node]) -> list[Node]:
        if not new:
            return []
        if self.passes:
            ctx = PassContext(self.nodes, self.results, self.batch_sizes)
            for p in self.passes:
                new = p(new, ctx)
        ordered = topological_order(new, self.nodes)
        ready: list[Node] = []
        for n in ordered:
            self.nodes[n.key] = n
            if isinstance(n, LLMNode) and n.kind == "llm":
                self._stage_calls[n.stage] = self._stage_calls.get(n.stage, 0) + 1
            source = _part_source(n)
            if source is not None and source not in self.results and \
                    all(d in self.results for d in n.deps if d != source):
                self._parts.setdefault(source, {})[int(n.args.get("index", 0))] = n.key  # type: ignore[union-attr]
                continue
            missing = [d for d in n.deps if d not in self.results]
            if missing:
                self._missing[n.key] = len(missing)
                for d in missing:
                    self._users.setdefault(d, []).append(n.key)
            else:
                ready += self._ready(n)
        return ready

    def _ready(self, n: Node) -> list[Node]:
        """Issue a node: its `Out` references become the producers' outputs (the graph
        keeps the issued, resolved node). A node that needs a missing output is missing
        too, and a part is taken from its source here: neither goes to a driver."""
        self.issued[n.key] = None
        if not n.deps and type(n) is LLMNode:
            return [n]  # reads no other step's output: nothing to resolve
        if any(self.results[d].missing for d in n.needs):
            return self._record(n.key, NodeResult(stage=n.stage, missing=True))
        if isinstance(n, OpNode) and n.op == PART:  # of a step's output, or of a literal value
            whole = self.results[n.refs[0]] if n.refs else NodeResult(value=n.args.get("source"))
            return self._record(n.key, _take_part(n, whole, False))
        if not n.refs:
            return [n]
        if isinstance(n, LLMNode):
            n = dataclasses.replace(n, prompt=resolve(n.prompt, self._output))
        else:
            args = {k: (self._value(v.step) if isinstance(v, Out) else v) for k, v in n.args.items()}
            n = dataclasses.replace(n, args=args)
        self.nodes[n.key] = n
        return [n]

    def _output(self, step: str) -> tuple[Part, ...]:
        return self.results[step].parts(self.query_id, step)

    def _value(self, step: str) -> object:
        r = self.results[step]
        return r.text if r.text is not None else r.value

    def streams_parts(self, key: str) -> bool:
        """Whether step `key` hands its output on part by part (decode pipelining)."""
        if not self._parts:
            return False
        return any(self.nodes[p].args.get("stream") for p in self._parts.get(key, {}).values())  # type: ignore[union-attr]

    @property
    def streams(self) -> bool:
        """Whether some running step's parts are awaited (its progress reports matter)."""
        return bool(self._parts)

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


def _part_source(n: Node) -> str | None:
    if isinstance(n, OpNode) and n.op == PART and n.refs:
        return n.refs[0]
    return None


MISSING = NodeResult(missing=True)


def _take_part(n: Node, whole: NodeResult, reported: bool) -> NodeResult:
    """A part node's result: its item of the source's output, else its `default`."""
    assert isinstance(n, OpNode)
    got = _part_of(whole, int(n.args.get("index", 0)), n.args.get("of", 1), reported)
    default = n.args.get("default")
    if not got.missing or default is None or whole.error is not None:
        return got
    if isinstance(default, Segment):
        return NodeResult(value=(default,), output_tokens=default.length, finished=whole.finished)
    return NodeResult(text=str(default), finished=whole.finished)


def _part_of(whole: NodeResult, index: int, of: int, reported: bool) -> NodeResult:
    """Part `index` of a finished output: its line or item (live text, a tool's list, a
    modelled list of segments); else an even share of its modelled tokens — unless the
    source reported its parts as it went (simulated marks): an unreported one does not
    exist. Parts beyond the output's own are missing."""
    if whole.missing:
        return MISSING
    if whole.error is not None:
        return NodeResult(error=whole.error, finished=whole.finished, error_kind=whole.error_kind)
    source = whole.text if whole.text is not None else whole.value
    if isinstance(source, str | list | tuple):
        items = split_parts(source) if isinstance(source, str) else source
        if index >= len(items):
            return MISSING
        item = items[index]
        if isinstance(item, str):
            return NodeResult(text=item, finished=whole.finished)
        if isinstance(item, Segment):
            return NodeResult(value=(item,), output_tokens=item.length, finished=whole.finished)
        return NodeResult(value=item, finished=whole.finished)
    if reported or whole.output_tokens <= 0:
        return MISSING
    return NodeResult(output_tokens=max(1, whole.output_tokens // max(of, 1)), finished=whole.finished)
