"""Shared test helpers: a scripted driver for the sans-IO core."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from flowserve.core.scheduler import SchedulerCore
from flowserve.core.state import CallState, QueryState
from flowserve.graph.nodes import CallEstimate, LLMNode, Node, NodeResult, OpNode
from flowserve.graph.program import Program
from flowserve.graph.prompt import Toks
from flowserve.graph.registry import WorkflowFactory
from flowserve.graph.replay import PlanWorkflow
from flowserve.graph.runtime import QueryRun
from flowserve.graph.workflow import Graph, Workflow
from flowserve.policies import make_dispatch, queue_factory
from flowserve.profiles.instance import instance_profile
from flowserve.types.commands import QueryDone, QueryFailed, RunOp, SendCall
from flowserve.types.events import CallFinished, OpFinished, QueryArrived
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, Query, WorkflowRef


def live_spec(name: str, max_inflight: int = 4, model: str = "llama-3.1-8b", gpu: str = "A100-80G"):
    return InstanceSpec(name, gpu, model, 1, max_inflight=max_inflight, backend="openai")


def make_core(specs: Sequence[InstanceSpec], dispatch: str = "round_robin", queue: str = "fcfs",
              workflows: Mapping[str, WorkflowFactory] | None = None, **kw) -> SchedulerCore:
    """A core serving the tests' workflows (`TEST_WORKFLOWS`) and `workflows`."""
    return SchedulerCore(specs, make_dispatch(dispatch), queue_factory(queue), instance_profile,
                         workflows={**TEST_WORKFLOWS, **(workflows or {})}, **kw)


def llm(key: str, n: int = 100, deps: tuple[str, ...] = (), out: int = 10, base: int = 0) -> LLMNode:
    return LLMNode(key, key.rstrip("0123456789"), (Toks(tuple(range(base, base + n))),), out, deps)


class ScriptProgram(Workflow):
    """A workflow from ready-made nodes: `first` at the start, `expand[key]` when `key` finishes."""

    name = "script"

    def __init__(self, first: list[Node], expand: dict[str, list[Node]] | None = None) -> None:
        self.first = first
        self.expand = dict(expand or {})

    def start(self, g: Graph) -> None:
        for n in self.first:
            g.add(n)

    def on_done(self, g: Graph, key: str, result: NodeResult) -> None:
        for n in self.expand.pop(key, []):
            g.add(n)

    def expected_remaining(self):
        return [CallEstimate("x", 100)]


def script(first: Sequence[Node], expand: Sequence[tuple[str, Sequence[Node]]] = ()) -> ScriptProgram:
    """`ScriptProgram` built from a ref's frozen arguments."""
    return ScriptProgram(list(first), {key: list(nodes) for key, nodes in expand})


TEST_WORKFLOWS: dict[str, WorkflowFactory] = {
    ScriptProgram.name: script, Program.name: Program, PlanWorkflow.name: PlanWorkflow,
}


def ref_of(program: ScriptProgram | WorkflowRef) -> WorkflowRef:
    """A ScriptProgram as the plain-data ref the core builds it from (nodes are frozen data)."""
    if isinstance(program, WorkflowRef):
        return program
    expand = tuple((key, tuple(nodes)) for key, nodes in program.expand.items())
    return WorkflowRef(ScriptProgram.name, (tuple(program.first), expand))


_ids = itertools.count(1000)


def query(program: ScriptProgram | WorkflowRef, t: float = 0.0, deadline: float | None = None,
          qid: int | None = None) -> Query:
    return Query(next(_ids) if qid is None else qid, t, "wf", ref_of(program), deadline)


class ScriptedDriver:
    """Feeds a core and finishes its calls/ops when told to; records everything."""

    def __init__(self, core: SchedulerCore) -> None:
        self.core = core
        self.t = 0.0
        self.inflight: dict[int, SendCall] = {}
        self.ops: dict[int, RunOp] = {}
        self.sent: list[SendCall] = []
        self.ended: dict[int, QueryDone | QueryFailed] = {}
        self.commands: list = []

    def feed(self, ev) -> list:
        cmds = self.core.handle(ev)
        self.commands += cmds
        for c in cmds:
            if isinstance(c, SendCall):
                assert c.call.id not in self.inflight
                self.inflight[c.call.id] = c
                self.sent.append(c)
            elif isinstance(c, RunOp):
                self.ops[c.op.id] = c
            elif isinstance(c, QueryDone | QueryFailed):
                assert c.query_id not in self.ended, "a query ended twice"
                self.ended[c.query_id] = c
            elif type(c).__name__ == "CancelCall":
                self.inflight.pop(c.call_id, None)
        return cmds

    def arrive(self, q: Query):
        return self.feed(QueryArrived(self.t, q))

    def finish(self, call_id: int, out: int | None = None):
        sc = self.inflight.pop(call_id)
        self.t += 1.0
        return self.feed(CallFinished(self.t, call_id, sc.instance,
                                      out if out is not None else sc.call.max_tokens))

    def finish_op(self, op_id: int, error: str | None = None):
        self.ops.pop(op_id)
        self.t += 0.5
        return self.feed(OpFinished(self.t, op_id, error))

    def run_all(self):
        while self.inflight or self.ops:
            if self.inflight:
                self.finish(next(iter(self.inflight)))
            else:
                self.finish_op(next(iter(self.ops)))


__all__ = ["LLMNode", "OpNode", "ScriptProgram", "ScriptedDriver", "live_spec", "llm", "make_core", "query"]



def call_state(call: LLMCall, qs: QueryState | None = None, ready: float = 0.0) -> CallState:
    """The call as the core holds it; without `qs`, its own interactive query of the default tenant
    (dispatch profiles read the query's class)."""
    if qs is None:
        q = Query(call.query_id, 0.0, call.workflow, ref_of(ScriptProgram([])), None, call.tenant, 0, "interactive")
        qs = QueryState(q, QueryRun(ScriptProgram([]), call.query_id))
    return CallState.of(call, qs, ready)
