"""The sans-IO scheduler core: events in, plain-data commands out; no IO, no clock.

It runs every query's workflow graph, tokenizes each ready LLM call's prompt (or asks
the driver to), binds it to an instance (global dispatch policy) — at once, or, for a
late-binding policy, when an instance has room — holds it in that instance's queue and
releases it when the instance can start it (local queue policy decides which). Both
drivers — the virtual-time simulator and the live gateway — feed it the same events.

Drivers use only `handle` and the query API below (`instance_status`, `is_current`,
`prefix_hit`, `keeps_prefix_index`, `indexed_tokens`, `predicted_wait_s`, `max_context`, `tick_s`,
`open_queries`, `open_calls`, `call_status`, `calls_of`, `decisions`, `wants_prefill_done`, `finished_calls`,
`dispatch_stats`, `decide`); everything else is private.

Invariant: every query that arrives ends in exactly one QueryDone or QueryFailed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from flowserve.cache.prefix_index import DEFAULT_WINDOW_S, PrefixIndex
from flowserve.core._calls import CallBook
from flowserve.core._leaders import DEFAULT_SHARING, PrefillSharing
from flowserve.core._ops import OpBook
from flowserve.core.lifecycle import CallStatus
from flowserve.core.state import CallRecord, InstanceStatus, QueryState
from flowserve.errors import FlowserveError
from flowserve.graph.nodes import LLMNode, Node, NodeResult, OpNode
from flowserve.graph.passes import GraphPass
from flowserve.graph.runtime import QueryRun
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
    PrefillDone,
    PrefixEvicted,
    QueryArrived,
    QueryCancelled,
    Tick,
    Tokenized,
)
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import Tokens, ToolOp

if TYPE_CHECKING:
    from flowserve.policies.base import DispatchPolicy
    from flowserve.policies.registry import QueueFactory


class SchedulerCore:
    def __init__(
        self,
        instances: Sequence[InstanceSpec],
        dispatch: DispatchPolicy,
        queue: QueueFactory,
        profile: Callable[[InstanceSpec], InstanceProfile],
        predictor: OutputPredictor | None = None,
        max_retries: int = 3,
        record_calls: bool = False,
        tokenizer: PromptTokenizer | None = None,
        passes: Sequence[GraphPass] = (),
        prefill_sharing: PrefillSharing | None = DEFAULT_SHARING,
    ) -> None:
        """prefill_sharing: when a call waits for another's prefill of the long prefix they
        share (`flowserve.core._leaders`); None: never."""
        self._dispatch = dispatch
        self._predictor = predictor or OutputPredictor()
        self._passes = tuple(passes)
        self._queries: dict[int, QueryState] = {}
        self._ops: dict[int, tuple[QueryState, str]] = {}
        self._ids = itertools.count(1)
        # the index is kept when the dispatch or the queue policy reads it
        prefix_index = None
        if dispatch.needs_prefix_index or queue.cls.needs_prefix_index:
            window = dispatch.prefix_window_s
            prefix_index = PrefixIndex(DEFAULT_WINDOW_S if window is None else window)
        self._calls = CallBook(self, dispatch, queue, profile, self._predictor, prefix_index,
                               tokenizer or NoText(), max_retries, self._queries, prefill_sharing)
        self._view = self._calls.view
        self._call_log: list[CallRecord] | None = [] if record_calls else None
        # non-LLM engines (embedding, reranker, vector DB, search) batch their ops
        self._opbook = OpBook(self, queue.cls.order_key)
        for spec in instances:
            if spec.kind == "llm":
                self._calls.fleet.add(spec)
            else:
                self._opbook.add_instance(spec)
        self._batch_sizes = self._opbook.batch_sizes()
        self._out: list[Command] = []
        calls = self._calls
        self._handlers: Mapping[type, Callable] = {
            CallFinished: self._on_call_finished,
            CallProgress: self._on_progress,
            PrefillDone: calls.on_prefill_done,
            InstanceCapacity: calls.on_capacity,
            QueryArrived: self._on_arrival,
            QueryCancelled: self._on_cancelled,
            OpFinished: self._on_op_finished,
            CallFailed: calls.on_failed,
            Tokenized: calls.on_tokenized,
            PrefixEvicted: self._on_evicted,
            InstanceDown: self._on_instance_down,
            InstanceUp: self._on_instance_up,
            Tick: _ignore,
            JobFinished: _ignore,  # policies see it in `observe`
        }

    # ------------------------------------------------------------------ entry point

    def handle(self, event: Event) -> list[Command]:
        handler = self._handlers.get(type(event))
        if handler is None:
            raise TypeError(f"unknown event {event!r}")
        self._view._now = event.time
        self._out = out = []
        self._calls.out = out
        self._opbook.out = out
        handler(event)
        out.extend(self._dispatch.observe(event, self._view))
        self._calls.release_all()
        self._opbook.release_all()
        return out

    # ------------------------------------------------------------------ query API (drivers)

    def instance_status(self) -> list[InstanceStatus]:
        return [InstanceStatus(i.name, i.spec, i.up, len(i.queue), len(i.running), max(i.outstanding, 0.0),
                               i.dispatched, i.completed) for i in self._calls.instances.values()]

    def is_current(self, call_id: int, instance: str) -> bool:
        """Is a report about this call on this instance about its current run? (False:
        the call was cancelled or moved meanwhile; the core ignores such reports.)"""
        return self._calls.running_on(call_id, instance) is not None

    def call_status(self, call_id: int) -> CallStatus | None:
        """Where a live call is in its lifecycle; None once it ended (or was never known)."""
        cs = self._calls.tracked.get(call_id)
        return None if cs is None else cs.status

    def calls_of(self, query_id: int) -> dict[int, CallStatus]:
        """The live calls of an open query, by id (empty once it ended)."""
        qs = self._queries.get(query_id)
        return {} if qs is None else {cid: cs.status for cid, cs in qs.inflight.items()}

    @property
    def keeps_prefix_index(self) -> bool:
        return self._calls.prefix_index is not None

    @property
    def indexed_tokens(self) -> int:
        """Tokens the router's prefix index holds (0 without an index)."""
        idx = self._calls.prefix_index
        return 0 if idx is None else idx.size

    def prefix_hit(self, prompt: Tokens, instance: str) -> int:
        """Prompt tokens the router's index believes `instance` caches (0 without an index)."""
        idx = self._calls.prefix_index
        return 0 if idx is None else min(idx.match_by_instance(prompt)[1].get(instance, 0), len(prompt))

    def predicted_wait_s(self, model: str | None) -> float | None:
        """What a new call would wait at best over the up instances serving `model`, with
        the engines batching (`ClusterView.queueing_delay_s`); None when none serves it."""
        waits = [self._view.queueing_delay_s(i) for i in self._view.up_instances(model)]
        return min(waits) if waits else None

    def max_context(self, model: str | None) -> int | None:
        limits = [i.max_context for i in self._calls.instances.values() if i.serves(model)]
        known = [x for x in limits if x is not None]
        return min(known) if known else None

    @property
    def wants_prefill_done(self) -> bool:
        """Drivers report `PrefillDone` (the engine's first token of a call) when set."""
        return self._calls.leaders is not None

    @property
    def tick_s(self) -> float | None:
        """Drivers send a Tick this often when set (policy clocks run on event time only)."""
        return self._dispatch.tick_s

    @property
    def open_queries(self) -> int:
        return len(self._queries)

    @property
    def open_calls(self) -> int:
        """Calls not yet ended (ready, waiting, queued or in flight)."""
        return len(self._calls.tracked)

    @property
    def decisions(self) -> int:
        return self._calls.decisions

    def finished_calls(self) -> list[CallRecord]:
        """Everything measured about each finished call, in finishing order
        (`record_calls=True`; empty otherwise)."""
        return list(self._call_log or ())

    def dispatch_stats(self) -> Mapping[str, int]:
        """The dispatch policy's own counters (exploit/explore, replications, ...)."""
        return MappingProxyType(dict(self._dispatch.stats))

    def decide(self, call_id: int) -> str | None:
        """Where the dispatch policy would send this live, tokenized call now, among its
        current candidates, without binding it (what-if tools, decision benchmarks).
        The policy's own state may advance as on any decision. None: no candidate."""
        cs = self._calls.tracked.get(call_id)
        assert cs is not None and cs.call is not None, f"call {call_id} is not a live tokenized call"
        candidates = self._calls.fleet.candidates(cs)
        if not candidates:
            return None
        return self._calls._choose(cs, candidates).name

    # ------------------------------------------------------------------ queries

    def _on_arrival(self, ev: QueryArrived) -> None:
        q = ev.query
        qs = QueryState(q, QueryRun(q.program, q.id, self._passes, self._batch_sizes))
        self._queries[qs.id] = qs
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
        now = self._view.now
        for node in nodes:
            if qs.failed:
                return
            if isinstance(node, LLMNode):
                self._calls.ready(qs, node, next(self._ids), now)
            else:
                op = ToolOp(next(self._ids), qs.id, node.key, node.stage, node.op, node.args)
                if isinstance(node, OpNode) and self._opbook.runs(node):
                    self._opbook.ready(qs, node, op)
                    continue
                self._ops[op.id] = (qs, node.key)
                self._out.append(RunOp(op))
        if not qs.failed and qs.run.finished:
            self._finish(qs)

    def _complete(self, qs: QueryState, key: str, result: NodeResult,
                  step: Callable[[], list[Node]] | None = None) -> None:
        qs.progressed = self._view.now
        self._advance(qs, step or (lambda: qs.run.complete(key, result)))

    def _finish(self, qs: QueryState) -> None:
        q = qs.query
        now = self._view.now
        try:
            output = qs.run.workflow.output(qs.run.results)
        except Exception as e:
            self._fail(qs, f"workflow {q.workflow!r} output failed: {type(e).__name__}: {e}")
            return
        del self._queries[q.id]
        met = None if q.deadline is None else now <= q.deadline + 1e-9
        self._out.append(QueryDone(q.id, now, now - q.arrival, met, output, qs.run.results))

    def _fail(self, qs: QueryState, reason: str) -> None:
        """Fail the whole query: cancel its calls everywhere and say why."""
        if qs.failed:
            return
        qs.failed = True
        for cs in list(qs.inflight.values()):
            self._calls.drop(cs)
        qs.inflight.clear()
        for op_id in [k for k, (owner, _) in self._ops.items() if owner is qs]:
            del self._ops[op_id]
        self._opbook.drop_query(qs)
        self._queries.pop(qs.id, None)
        self._out.append(QueryFailed(qs.id, self._view.now, reason))

    def _on_cancelled(self, ev: QueryCancelled) -> None:
        """The client left: the query ends, its queued calls dropped, its running ones cancelled."""
        qs = self._queries.get(ev.query_id)
        if qs is not None:
            self._fail(qs, ev.reason)

    def fail_query(self, qs: QueryState, reason: str) -> None:
        """For the books: a call or op that cannot run fails its query."""
        self._fail(qs, reason)

    # ------------------------------------------------------------------ completions

    def _on_call_finished(self, ev: CallFinished) -> None:
        taken = self._calls.take_running(ev.call_id, ev.instance)
        if taken is None:
            return  # stale: cancelled or moved meanwhile
        cs, inst = taken
        call, qs = cs.call, cs.query
        assert call is not None
        inst.completed += 1
        self._calls.on_finished(cs, inst, ev)
        if self._call_log is not None:
            released = cs.released if cs.released is not None else ev.time
            self._call_log.append(CallRecord(
                call.id, call.query_id, call.workflow, call.stage, inst.name,
                call.input_tokens, ev.output_tokens, ev.cached_tokens, cs.ready, cs.enqueued,
                released, ev.started, ev.first_token, ev.time, ev.preemptions, cs.attempts + 1))
        del qs.inflight[call.id]
        self._complete(qs, call.node, NodeResult(
            output_tokens=ev.output_tokens, text=ev.text, stage=call.stage, finish_reason=ev.finish_reason,
            instance=inst.name,
            prompt_tokens=ev.prompt_tokens or call.input_tokens, cached_tokens=ev.cached_tokens,
            first_token=ev.first_token, finished=ev.time, ready=cs.ready, extra=ev.extra))

    def _on_progress(self, ev: CallProgress) -> None:
        cs = self._calls.running_on(ev.call_id, ev.instance)
        if cs is None:
            return
        self._calls.on_progress(cs)
        if not cs.query.run.streams:
            return
        qs, key = cs.query, cs.node.key
        result = NodeResult(output_tokens=ev.output_tokens, text=ev.text, stage=cs.stage, instance=ev.instance,
                            finished=ev.time)
        self._complete(qs, key, result, lambda: qs.run.progress(key, ev.index, result))

    def _on_op_finished(self, ev: OpFinished) -> None:
        batched = self._opbook.finished(ev)
        entry = (batched.query, batched.node.key) if batched is not None else self._ops.pop(ev.op_id, None)
        if entry is None:
            return
        qs, key = entry
        self._complete(qs, key, NodeResult(output_tokens=ev.output_tokens, error=ev.error, value=ev.result,
                                           finished=ev.time))

    # ------------------------------------------------------------------ instances and caches

    def _on_evicted(self, ev: PrefixEvicted) -> None:
        if self._calls.prefix_index is not None:
            self._calls.prefix_index.discard(ev.instance, ev.tokens, ev.start, ev.time)

    def _on_instance_down(self, ev: InstanceDown) -> None:
        if ev.instance in self._opbook.instances:
            self._opbook.instance_down(ev.instance)
        else:
            self._calls.on_instance_down(ev)

    def _on_instance_up(self, ev: InstanceUp) -> None:
        if ev.spec.kind != "llm":
            self._opbook.instance_up(ev.spec)
            self._batch_sizes = self._opbook.batch_sizes()
        else:
            self._calls.on_instance_up(ev)


def _ignore(event: Event) -> None:
    """Events only policies watch (ticks, finished jobs)."""
