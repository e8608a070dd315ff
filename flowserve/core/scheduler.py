"""The sans-IO scheduler core: events in, plain-data commands out; no IO, no clock.

It runs every query's workflow graph, tokenizes each ready LLM call's prompt (or asks
the driver to), binds it to an instance (global dispatch policy) — at once, or, for a
late-binding policy, when an instance has room — holds it in that instance's queue and
releases it when the instance can start it (local queue policy decides which). Both
drivers — the virtual-time simulator and the live gateway — feed it the same events.

Drivers read the core only through its query API: `instance_status`, `is_current`,
`prefix_hit`, `keeps_prefix_index`, `predicted_wait_s`, `max_context`, `tick_s`,
`open_queries`, `decisions`.

Invariant: every query that arrives ends in exactly one QueryDone or QueryFailed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from flowserve.cache.prefix_index import DEFAULT_WINDOW_S, PrefixIndex
from flowserve.core.calls import CallBook
from flowserve.core.ops import OpBook
from flowserve.core.state import CallRecord, InstanceStatus, QueryState
from flowserve.errors import FlowserveError
from flowserve.graph.nodes import LLMNode, Node, NodeResult, OpNode
from flowserve.graph.passes import GraphPass
from flowserve.graph.runtime import QueryRun
from flowserve.policies.base import DispatchPolicy, QueuePolicy
from flowserve.profiles.instance import InstanceProfile
from flowserve.profiles.predictor import OutputPredictor
from flowserve.tokenize.prompts import NoText, PromptTokenizer
from flowserve.types.commands import Command, QueryDone, QueryFailed, RunOp
from flowserve.types.events import (
    CallFailed,
    CallFinished,
    CallProgress,
    Event,
    InstanceCapacity,
    InstanceDown,
    InstanceUp,
    JobFinished,
    OpFinished,
    PrefixEvicted,
    QueryArrived,
    QueryCancelled,
    Tick,
    Tokenized,
)
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import Tokens, ToolOp


class SchedulerCore:
    def __init__(
        self,
        instances: Sequence[InstanceSpec],
        dispatch: DispatchPolicy,
        queue_factory: Callable[[], QueuePolicy],
        profile: Callable[[InstanceSpec], InstanceProfile],
        predictor: OutputPredictor | None = None,
        max_retries: int = 3,
        record_calls: bool = False,
        tokenizer: PromptTokenizer | None = None,
        passes: Sequence[GraphPass] = (),
    ) -> None:
        self.dispatch = dispatch
        self.predictor = predictor or OutputPredictor()
        self.passes = tuple(passes)
        self.queries: dict[int, QueryState] = {}
        self._ops: dict[int, tuple[QueryState, str]] = {}
        self._ids = itertools.count(1)
        probe = queue_factory()
        # the index is kept when the dispatch or the queue policy reads it
        needs_index = dispatch.needs_prefix_index or getattr(probe, "needs_prefix_index", False)
        window = getattr(dispatch, "prefix_window_s", None)
        prefix_index = PrefixIndex(DEFAULT_WINDOW_S if window is None else window) if needs_index else None
        self.calls = CallBook(self, dispatch, queue_factory, profile, self.predictor, prefix_index,
                              tokenizer or NoText(), max_retries, probe.uses_deadline)
        self.view = self.calls.view
        self.call_log: list[CallRecord] | None = [] if record_calls else None
        # non-LLM engines (embedding, reranker, vector DB, search) batch their ops
        self.ops = OpBook(self, getattr(probe, "order_key", None))
        for spec in instances:
            if spec.kind == "llm":
                self.calls.add_instance(spec)
            else:
                self.ops.add_instance(spec)
        self._batch_sizes = self.ops.batch_sizes()
        self._out: list[Command] = []

    # ------------------------------------------------------------------ entry point

    def handle(self, event: Event) -> list[Command]:
        self.view.now = event.time
        self._out = out = []
        calls = self.calls
        calls.out = out
        self.ops.out = out
        if isinstance(event, CallFinished):
            self._on_call_finished(event)
        elif isinstance(event, CallProgress):
            self._on_progress(event)
        elif isinstance(event, InstanceCapacity):
            calls.on_capacity(event)
        elif isinstance(event, QueryArrived):
            self._on_arrival(event)
        elif isinstance(event, QueryCancelled):
            if (qs := self.queries.get(event.query_id)) is not None:
                self._fail(qs, event.reason)
        elif isinstance(event, OpFinished):
            self._on_op_finished(event)
        elif isinstance(event, CallFailed):
            calls.on_failed(event)
        elif isinstance(event, Tokenized):
            calls.on_tokenized(event)
        elif isinstance(event, PrefixEvicted):
            if calls.prefix_index is not None:
                calls.prefix_index.discard(event.instance, event.tokens, event.start, event.time)
        elif isinstance(event, InstanceDown):
            if event.instance in self.ops.instances:
                self.ops.instance_down(event.instance)
            else:
                calls.on_instance_down(event)
        elif isinstance(event, InstanceUp):
            if event.spec.kind != "llm":
                self.ops.instance_up(event.spec)
                self._batch_sizes = self.ops.batch_sizes()
            else:
                calls.on_instance_up(event)
        elif not isinstance(event, Tick | JobFinished):
            raise TypeError(f"unknown event {event!r}")
        out.extend(self.dispatch.observe(event, self.view))
        calls.release_all()
        self.ops.release_all()
        return out

    # ------------------------------------------------------------------ query API (drivers)

    def instance_status(self) -> list[InstanceStatus]:
        return [InstanceStatus(i.name, i.spec, i.up, len(i.queue), len(i.running), max(i.outstanding, 0.0),
                               i.dispatched, i.completed) for i in self.calls.instances.values()]

    def is_current(self, call_id: int, instance: str) -> bool:
        """Is a report about this call on this instance about its current run? (False:
        the call was cancelled or moved meanwhile; the core ignores such reports.)"""
        return self.calls.running_on(call_id, instance) is not None

    @property
    def keeps_prefix_index(self) -> bool:
        return self.calls.prefix_index is not None

    def prefix_hit(self, prompt: Tokens, instance: str) -> int:
        """Prompt tokens the router's index believes `instance` caches (0 without an index)."""
        idx = self.calls.prefix_index
        return 0 if idx is None else min(idx.match_by_instance(prompt)[1].get(instance, 0), len(prompt))

    def predicted_wait_s(self, model: str | None) -> float | None:
        """What a new call would wait at best over the up instances serving `model`, with
        the engines batching (`ClusterView.queueing_delay_s`); None when none serves it."""
        waits = [self.view.queueing_delay_s(i) for i in self.view.up_instances(model)]
        return min(waits) if waits else None

    def max_context(self, model: str | None) -> int | None:
        limits = [i.max_context for i in self.calls.instances.values() if i.serves(model)]
        known = [x for x in limits if x is not None]
        return min(known) if known else None

    @property
    def tick_s(self) -> float | None:
        """Drivers send a Tick this often when set (policy clocks run on event time only)."""
        return getattr(self.dispatch, "tick_s", None)

    @property
    def open_queries(self) -> int:
        return len(self.queries)

    @property
    def decisions(self) -> int:
        return self.calls.decisions

    # ------------------------------------------------------------------ queries

    def _on_arrival(self, ev: QueryArrived) -> None:
        q = ev.query
        qs = QueryState(q, QueryRun(q.program, q.id, self.passes, self._batch_sizes))
        self.queries[qs.id] = qs
        self._advance(qs, lambda: qs.run.start())

    def _advance(self, qs: QueryState, step: Callable[[], list[Node]]) -> None:
        """Run a workflow hook; a workflow error or exception fails its own query."""
        try:
            nodes = step()
        except FlowserveError as e:
            self._fail(qs, str(e))
            return
        except Exception as e:  # the workflow's own code: end its query, keep the others
            self._fail(qs, f"workflow {qs.query.workflow!r} raised {type(e).__name__}: {e}")
            return
        now = self.view.now
        for node in nodes:
            if qs.failed:
                return
            if isinstance(node, LLMNode):
                self.calls.ready(qs, node, next(self._ids), now)
            else:
                op = ToolOp(next(self._ids), qs.id, node.key, node.stage, node.op, node.args)
                if isinstance(node, OpNode) and self.ops.runs(node):
                    self.ops.ready(qs, node, op)
                    continue
                self._ops[op.id] = (qs, node.key)
                self._out.append(RunOp(op))
        if not qs.failed and qs.run.finished:
            self._finish(qs)

    def _complete(self, qs: QueryState, key: str, result: NodeResult,
                  step: Callable[[], list[Node]] | None = None) -> None:
        qs.progressed = self.view.now
        self._advance(qs, step or (lambda: qs.run.complete(key, result)))

    def _finish(self, qs: QueryState) -> None:
        q = qs.query
        now = self.view.now
        try:
            output = qs.run.workflow.output(qs.run.results)
        except Exception as e:
            self._fail(qs, f"workflow {q.workflow!r} output failed: {type(e).__name__}: {e}")
            return
        del self.queries[q.id]
        met = None if q.deadline is None else now <= q.deadline + 1e-9
        self._out.append(QueryDone(q.id, now, now - q.arrival, met, output, qs.run.results))

    def _fail(self, qs: QueryState, reason: str) -> None:
        """Fail the whole query: cancel its calls everywhere and say why."""
        if qs.failed:
            return
        qs.failed = True
        for cs in list(qs.inflight.values()):
            self.calls.drop(cs)
        qs.inflight.clear()
        for op_id in [k for k, (owner, _) in self._ops.items() if owner is qs]:
            del self._ops[op_id]
        self.ops.drop_query(qs)
        self.queries.pop(qs.id, None)
        self._out.append(QueryFailed(qs.id, self.view.now, reason))

    # ------------------------------------------------------------------ completions

    def _on_call_finished(self, ev: CallFinished) -> None:
        taken = self.calls.take_running(ev.call_id, ev.instance)
        if taken is None:
            return  # stale: cancelled or moved meanwhile
        cs, inst = taken
        call, qs = cs.call, cs.query
        assert call is not None
        inst.completed += 1
        self.calls.on_finished(cs, inst, ev)
        if self.call_log is not None:
            released = cs.released if cs.released is not None else ev.time
            self.call_log.append(CallRecord(
                call.id, call.query_id, call.workflow, call.stage, inst.name,
                call.input_tokens, ev.output_tokens, ev.cached_tokens, cs.ready, cs.enqueued,
                released, ev.started, ev.first_token, ev.time, ev.preemptions, cs.attempts + 1))
        del qs.inflight[call.id]
        self._complete(qs, call.node, NodeResult(
            output_tokens=ev.output_tokens, text=ev.text, stage=call.stage, finish_reason=ev.finish_reason,
            instance=inst.name,
            prompt_tokens=ev.prompt_tokens or call.input_tokens, cached_tokens=ev.cached_tokens,
            first_token=ev.first_token, finished=ev.time, ready=cs.ready))

    def _on_progress(self, ev: CallProgress) -> None:
        cs = self.calls.running_on(ev.call_id, ev.instance)
        if cs is None or not cs.query.run.streams:
            return
        qs, key = cs.query, cs.node.key
        result = NodeResult(output_tokens=ev.output_tokens, text=ev.text, stage=cs.stage, instance=ev.instance,
                            finished=ev.time)
        self._complete(qs, key, result, lambda: qs.run.progress(key, ev.index, result))

    def _on_op_finished(self, ev: OpFinished) -> None:
        batched = self.ops.finished(ev)
        entry = (batched.query, batched.node.key) if batched is not None else self._ops.pop(ev.op_id, None)
        if entry is None:
            return
        qs, key = entry
        self._complete(qs, key, NodeResult(output_tokens=ev.output_tokens, error=ev.error, value=ev.result,
                                           finished=ev.time))

    def fail_query(self, qs: QueryState, reason: str) -> None:
        """For the call book: a call that cannot run fails its query."""
        self._fail(qs, reason)
