"""The core's book of running queries: each workflow's graph, from the query's arrival to
the one QueryDone or QueryFailed it ends with.

The workflow's hooks run here (`start`, `on_done`, and for an open-ended workflow — a
program — `on_input` and `on_close`); the LLM steps they add go to the call book,
batchable ops to the op book, other ops to the driver (`RunOp`). A finished step
completes its node and adds to the query's attained service: in all, and along the
critical path to the step (what Autellix's PLAS and ATLAS order by). An open-ended query
reports each step as it ends (`StepDone`); one of its steps that fails or is cancelled
ends alone; and when it finishes, its calls per stage teach the stage priors.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from flowserve.core.outbox import Outbox
from flowserve.core.records import CallRecord
from flowserve.core.state import CallState, QueryState
from flowserve.errors import FailureKind, FlowserveError
from flowserve.graph.nodes import LLMNode, Node, NodeResult, OpNode
from flowserve.graph.passes import GraphPass
from flowserve.graph.runtime import QueryRun
from flowserve.profiles.stage_priors import StagePriors
from flowserve.types.commands import Command, QueryDone, QueryFailed, RunOp, StepDone
from flowserve.types.events import (
    CallCancelled,
    CallFinished,
    CallProgress,
    InstanceUp,
    OpFinished,
    QueryArrived,
    QueryCancelled,
    QueryClosed,
    QueryInput,
)
from flowserve.types.work import ToolOp

if TYPE_CHECKING:
    from flowserve.core._binding import CallEnds
    from flowserve.core._calls import CallBook
    from flowserve.core._ops import OpBook, QueryEnds
    from flowserve.graph.registry import WorkflowRegistry


class RunBook:
    def __init__(self, queries: dict[int, QueryState], workflows: WorkflowRegistry,
                 calls: Callable[[CallEnds], CallBook], ops: Callable[[QueryEnds], OpBook],
                 passes: Sequence[GraphPass], record_calls: bool) -> None:
        """workflows: how a query's `WorkflowRef` becomes its workflow object; calls, ops:
        build the books of the queries' calls and batched ops, which hand this book what
        they cannot run (`end_call`, `fail`)."""
        self.queries = queries
        self._workflows = workflows
        self.calls = calls(self)
        self.opbook = ops(self)
        self._view = self.calls.view
        self._passes = tuple(passes)
        self._batch_sizes: Mapping[str, int] = self.opbook.batch_sizes()
        self.priors = StagePriors()
        self._ops: dict[int, tuple[QueryState, str]] = {}  # tool ops the driver runs
        self._ids = itertools.count(1)
        self.call_log: list[CallRecord] | None = [] if record_calls else None
        self._out = Outbox()

    # ------------------------------------------------------------------ arrival and input

    def arrive(self, ev: QueryArrived) -> list[Command]:
        """A query arrives: its workflow is built from its ref (a query whose workflow
        cannot be built fails at once) and started."""
        q = ev.query
        try:
            workflow = self._workflows.build(q.ref)
        except FlowserveError as e:
            return [QueryFailed(q.id, ev.time, str(e), e.kind)]
        except Exception as e:  # the factory's own code
            return [QueryFailed(q.id, ev.time, f"workflow {q.workflow!r} could not be built: {type(e).__name__}: {e}",
                                FailureKind.APP_ERROR)]
        qs = QueryState(q, QueryRun(workflow, q.id, self._passes, self._batch_sizes), self.priors)
        self.queries[qs.id] = qs
        self._advance(qs, qs.run.start)
        return self._out.take()

    def input(self, ev: QueryInput) -> list[Command]:
        qs = self.queries.get(ev.query_id)
        if qs is not None:  # else it ended meanwhile: the driver answers its client
            self._advance(qs, lambda: qs.run.input(ev.data))
        return self._out.take()

    def close(self, ev: QueryClosed) -> list[Command]:
        qs = self.queries.get(ev.query_id)
        if qs is not None:
            self._advance(qs, qs.run.close)
        return self._out.take()

    def cancel_query(self, ev: QueryCancelled) -> list[Command]:
        """The client left: the query ends, its queued calls dropped, its running ones cancelled."""
        qs = self.queries.get(ev.query_id)
        return [] if qs is None else self.fail(qs, ev.reason, FailureKind.CANCELLED)

    def cancel(self, ev: CallCancelled) -> list[Command]:
        qs = self.queries.get(ev.query_id)
        cs = None if qs is None else next((c for c in qs.inflight.values() if c.node.key == ev.node), None)
        if cs is None:
            return []  # it ended meanwhile
        self._out.extend(self.calls.drop(cs))
        return self.end_call(cs, ev.reason, FailureKind.CANCELLED)

    def op_instance_up(self, ev: InstanceUp) -> list[Command]:
        """A non-LLM engine instance is up: graphs split batchable ops by its batch sizes."""
        out = self.opbook.instance_up(ev.spec)
        self._batch_sizes = self.opbook.batch_sizes()
        return out

    # ------------------------------------------------------------------ the graph

    def _advance(self, qs: QueryState, step: Callable[[], list[Node]]) -> None:
        """Run a workflow hook; a workflow error or exception fails its own query."""
        try:
            nodes = step()
        except FlowserveError as e:
            self._out.extend(self.fail(qs, str(e), e.kind))
            return
        except Exception as e:  # the workflow's own code: end its query, keep the others
            self._out.extend(self.fail(qs, f"workflow {qs.query.workflow!r} raised {type(e).__name__}: {e}",
                                       FailureKind.APP_ERROR))
            return
        now = self._view.now
        for node in nodes:
            if qs.ended:
                return
            if isinstance(node, LLMNode):
                self._out.extend(self.calls.ready(qs, node, next(self._ids), now))
            else:
                op = ToolOp(next(self._ids), qs.id, node.key, node.stage, node.op, node.args)
                if isinstance(node, OpNode) and self.opbook.runs(node):
                    self._out.extend(self.opbook.ready(qs, node, op))
                    continue
                self._ops[op.id] = (qs, node.key)
                self._out.append(RunOp(op))
        if not qs.ended and qs.run.finished:
            self._finish(qs)

    def _complete(self, qs: QueryState, key: str, result: NodeResult,
                  step: Callable[[], list[Node]] | None = None, service_s: float = 0.0) -> None:
        qs.progress(self._view.now)
        node = qs.run.nodes.get(key)
        qs.attain(key, node.deps if node is not None else (), service_s)
        if step is None and qs.run.workflow.open_ended:
            self._out.append(StepDone(qs.id, key, result))
        self._advance(qs, step or (lambda: qs.run.complete(key, result)))

    def _finish(self, qs: QueryState) -> None:
        q = qs.query
        now = self._view.now
        try:
            output = qs.run.workflow.output(qs.run.results)
        except Exception as e:
            self._out.extend(self.fail(qs, f"workflow {q.workflow!r} output failed: {type(e).__name__}: {e}",
                                       FailureKind.APP_ERROR))
            return
        del self.queries[q.id]
        qs.end()
        wf = qs.run.workflow
        end = now
        if wf.open_ended:  # a program ends with its last step, not when it was closed (maybe idle long after)
            end = max((r.finished for r in qs.run.results.values() if r.finished is not None), default=q.arrival)
        if wf.learns_remaining:
            self.priors.observe(q.workflow, [(r.stage, r.prompt_tokens) for r in qs.run.results.values()
                                             if r.instance is not None and r.error is None])
        met = None if q.deadline is None else end <= q.deadline + 1e-9
        self._out.append(QueryDone(q.id, now, end - q.arrival, met, output, qs.run.results))

    def fail(self, qs: QueryState, reason: str, kind: FailureKind) -> list[Command]:
        """Fail the whole query: cancel its calls everywhere and say why (the one path by
        which a query fails)."""
        if qs.ended:
            return self._out.take()
        qs.end(failed=True)
        for cs in list(qs.inflight.values()):
            self._out.extend(self.calls.drop(cs))
        qs.inflight.clear()
        for op_id in [k for k, (owner, _) in self._ops.items() if owner is qs]:
            del self._ops[op_id]
        self.opbook.drop_query(qs)
        self.queries.pop(qs.id, None)
        self._out.append(QueryFailed(qs.id, self._view.now, reason, kind, qs.run.results))
        return self._out.take()

    def end_call(self, cs: CallState, reason: str, kind: FailureKind) -> list[Command]:
        """A call that failed or was cancelled (and was dropped from the books): an
        open-ended query goes on without it (its step's result carries the reason); any
        other query fails."""
        qs = cs.query
        if not qs.run.workflow.open_ended:
            return self.fail(qs, reason, kind)
        qs.inflight.pop(cs.id, None)
        self._complete(qs, cs.node.key, NodeResult(error=reason, stage=cs.stage, ready=cs.ready,
                                                   finished=self._view.now, error_kind=kind))
        return self._out.take()

    # ------------------------------------------------------------------ completions

    def call_finished(self, ev: CallFinished) -> list[Command]:
        taken = self.calls.finish(ev)
        if taken is None:
            return []  # stale: cancelled or moved meanwhile
        cs, inst, released_followers = taken
        self._out.extend(released_followers)
        call, qs = cs.call, cs.query
        assert call is not None
        released = cs.released if cs.released is not None else ev.time
        if self.call_log is not None:
            self.call_log.append(CallRecord(
                call.id, call.query_id, call.workflow, call.stage, inst.name,
                call.input_tokens, ev.output_tokens, ev.cached_tokens, cs.ready, cs.enqueued,
                released, ev.started, ev.first_token, ev.time, ev.preemptions, cs.attempts + 1))
        del qs.inflight[call.id]
        qs.ran_on(inst.name)
        started = ev.started if ev.started is not None else released
        self._complete(qs, call.node, NodeResult(
            output_tokens=ev.output_tokens, text=ev.text, stage=call.stage, finish_reason=ev.finish_reason,
            instance=inst.name,
            prompt_tokens=ev.prompt_tokens or call.input_tokens, cached_tokens=ev.cached_tokens,
            first_token=ev.first_token, finished=ev.time, ready=cs.ready, extra=ev.extra),
            service_s=max(ev.time - started, 0.0))
        return self._out.take()

    def progress(self, ev: CallProgress) -> list[Command]:
        cs = self.calls.running_on(ev.call_id, ev.instance)
        if cs is None:
            return []
        self.calls.on_progress(cs)
        if not cs.query.run.streams:
            return []
        qs, key = cs.query, cs.node.key
        result = NodeResult(output_tokens=ev.output_tokens, text=ev.text, stage=cs.stage, instance=ev.instance,
                            finished=ev.time)
        self._complete(qs, key, result, lambda: qs.run.progress(key, ev.index, result))
        return self._out.take()

    def op_finished(self, ev: OpFinished) -> list[Command]:
        batched = self.opbook.finished(ev)
        entry = (batched.query, batched.node.key) if batched is not None else self._ops.pop(ev.op_id, None)
        if entry is None:
            return []
        qs, key = entry
        self._complete(qs, key, NodeResult(output_tokens=ev.output_tokens, error=ev.error, value=ev.result,
                                           finished=ev.time, error_kind=None if ev.error is None else ev.kind))
        return self._out.take()
