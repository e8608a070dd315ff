"""The sans-IO scheduler core: events in, commands out; no IO, no clock.

It runs every query's workflow graph, dispatches each ready LLM call to an instance
(global dispatch policy), holds it in that instance's waiting queue, and releases it
when the instance can start it (local queue policy decides which). Both drivers — the
virtual-time simulator and the live gateway — feed it the same events.

Invariant: every query that arrives ends in exactly one QueryDone or QueryFailed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from flowserve.cache.prefix_index import DEFAULT_WINDOW_S, PrefixIndex
from flowserve.errors import FlowserveError
from flowserve.graph.nodes import LLMNode, Node, NodeResult, OpNode
from flowserve.policies.base import DispatchPolicy, QueuePolicy
from flowserve.profiles.instance import InstanceProfile
from flowserve.profiles.predictor import OutputPredictor
from flowserve.types import (
    CallFailed,
    CallFinished,
    CancelCall,
    Command,
    Event,
    InstanceCapacity,
    InstanceDown,
    InstanceSpec,
    InstanceUp,
    JobFinished,
    LLMCall,
    OpFinished,
    PrefixEvicted,
    QueryArrived,
    QueryDone,
    QueryFailed,
    RunOp,
    SendCall,
    Tick,
    ToolOp,
)
from flowserve.view import CallState, ClusterView, FinishedCall, InstanceState, QueryState


@dataclass(frozen=True, slots=True)
class CallRecord:
    """Everything measured about one finished call (for metrics)."""

    call_id: int
    query_id: int
    workflow: str
    stage: str
    instance: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    ready: float
    enqueued: float
    released: float
    started: float | None
    first_token: float | None
    finished: float
    preemptions: int
    attempts: int


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
    ) -> None:
        self.dispatch = dispatch
        self._queue_factory = queue_factory
        self._profile = profile
        self.predictor = predictor or OutputPredictor()
        self.max_retries = max_retries
        self.instances: dict[str, InstanceState] = {}
        self._max_context: dict[str, int | None] = {}
        self.queries: dict[int, QueryState] = {}
        self.calls: dict[int, CallState] = {}
        self._ops: dict[int, tuple[QueryState, str]] = {}
        self._ids = itertools.count(1)
        # the index is kept when the dispatch or the queue policy reads it
        needs_index = dispatch.needs_prefix_index or getattr(queue_factory(), "needs_prefix_index", False)
        window = getattr(dispatch, "prefix_window_s", None)
        window = DEFAULT_WINDOW_S if window is None else window
        self.prefix_index = PrefixIndex(window) if needs_index else None
        self.view = ClusterView(self.instances, self.predictor, self.queries, self.prefix_index)
        self.call_log: list[CallRecord] | None = [] if record_calls else None
        self.decisions = 0
        for spec in instances:
            self._add_instance(spec)
        # instances whose queue or capacity changed (a dict: release order is deterministic)
        self._dirty: dict[InstanceState, None] = {}
        self._out: list[Command] = []

    # ------------------------------------------------------------------ entry point

    def handle(self, event: Event) -> list[Command]:
        self.view.now = now = event.time
        self._out = out = []
        if isinstance(event, CallFinished):
            self._on_call_finished(event)
        elif isinstance(event, InstanceCapacity):
            inst = self.instances.get(event.instance)
            if inst is not None:
                inst.free_seqs = event.free_seqs
                inst.headroom = event.headroom_tokens
                inst.kv_free = event.kv_free_tokens
                self._dirty[inst] = None
        elif isinstance(event, QueryArrived):
            self._on_arrival(event)
        elif isinstance(event, OpFinished):
            self._on_op_finished(event)
        elif isinstance(event, CallFailed):
            self._on_call_failed(event)
        elif isinstance(event, PrefixEvicted):
            if self.prefix_index is not None:
                self.prefix_index.discard(event.instance, event.tokens, event.start, now)
        elif isinstance(event, InstanceDown):
            self._on_instance_down(event)
        elif isinstance(event, InstanceUp):
            self._on_instance_up(event)
        elif not isinstance(event, Tick | JobFinished):
            raise TypeError(f"unknown event {event!r}")
        out.extend(self.dispatch.observe(event, self.view))
        while self._dirty:
            inst = next(iter(self._dirty))
            del self._dirty[inst]
            self._release(inst, now)
        return out

    # ------------------------------------------------------------------ queries

    def _on_arrival(self, ev: QueryArrived) -> None:
        qs = QueryState(ev.query)
        self.queries[qs.id] = qs
        try:
            nodes = qs.run.start()
        except FlowserveError as e:
            self._fail(qs, str(e))
            return
        self._issue(qs, nodes)

    def _issue(self, qs: QueryState, nodes: Sequence[Node]) -> None:
        now = self.view.now
        for node in nodes:
            if qs.failed:
                return
            if isinstance(node, LLMNode):
                self._issue_call(qs, node, now)
            else:
                self._issue_op(qs, node)
        if not qs.failed and qs.run.finished:
            self._finish(qs)

    def _issue_call(self, qs: QueryState, node: LLMNode, now: float) -> None:
        q = qs.query
        call = LLMCall(
            id=next(self._ids), query_id=q.id, node=node.key, stage=node.stage,
            workflow=q.workflow, prompt=node.prompt,
            predicted_output=min(self.predictor.predict(q.workflow, node.stage), node.max_tokens),
            max_tokens=node.max_tokens, model=node.model, tenant=q.tenant, priority=q.priority,
            sim_output=node.sim_output, payload=node.payload,
        )
        cs = CallState(call, qs, now)
        qs.inflight[call.id] = cs
        self.calls[call.id] = cs
        self._dispatch(cs)

    def _issue_op(self, qs: QueryState, node: OpNode) -> None:
        op = ToolOp(next(self._ids), qs.id, node.key, node.stage, node.op, node.args,
                    node.sim_duration, node.sim_error)
        self._ops[op.id] = (qs, node.key)
        self._out.append(RunOp(op))

    def _advance(self, qs: QueryState, key: str, result: NodeResult) -> None:
        qs.progressed = self.view.now
        try:
            nodes = qs.run.complete(key, result)
        except FlowserveError as e:
            self._fail(qs, str(e))
            return
        self._issue(qs, nodes)

    def _finish(self, qs: QueryState) -> None:
        q = qs.query
        now = self.view.now
        del self.queries[q.id]
        met = None if q.deadline is None else now <= q.deadline + 1e-9
        self._out.append(QueryDone(q.id, now, now - q.arrival, met))

    def _fail(self, qs: QueryState, reason: str) -> None:
        """Fail the whole query: cancel its calls everywhere and say why."""
        if qs.failed:
            return
        qs.failed = True
        for cs in list(qs.inflight.values()):
            inst = self.instances.get(cs.instance) if cs.instance else None
            if inst is not None:
                if cs.id in inst.running:
                    del inst.running[cs.id]
                    self._out.append(CancelCall(cs.id, inst.name))
                    self._dirty[inst] = None
                    inst.outstanding -= cs.t_comp
                elif cs.queued:
                    self._unqueue(inst, cs)
                    inst.outstanding -= cs.t_comp
            self.calls.pop(cs.id, None)
        qs.inflight.clear()
        for op_id in [k for k, (owner, _) in self._ops.items() if owner is qs]:
            del self._ops[op_id]
        self.queries.pop(qs.id, None)
        self._out.append(QueryFailed(qs.id, self.view.now, reason))

    # ------------------------------------------------------------------ calls

    def _dispatch(self, cs: CallState) -> None:
        call = cs.call
        serving = [i for i in self.instances.values() if i.up and _serves(i, call.model)]
        candidates = [i for i in serving if i.name not in cs.excluded] or serving
        if not candidates:
            model = call.model or "any model"
            self._fail(cs.query, f"no instance is up that serves {model}")
            return
        limit = self._max_context.get(candidates[0].name)
        if limit is not None and call.input_tokens + 1 > limit:
            self._fail(cs.query, f"prompt of {call.input_tokens} tokens (stage {call.stage!r}) "
                                 f"exceeds the model's context of {limit} tokens")
            return
        inst = self.dispatch.choose(cs, candidates, self.view)
        self.decisions += 1
        now = self.view.now
        cs.instance = inst.name
        cs.enqueued = now
        cs.t_comp = self.view.t_comp(cs, inst)
        inst.outstanding += cs.t_comp
        inst.dispatched += 1
        inst.queue.push(cs)  # before the index learns of this prompt: queues may match it first
        cs.queued = True
        if self.prefix_index is not None:
            self.prefix_index.add(call.prompt, inst.name, now)
        self._dirty[inst] = None

    def _release(self, inst: InstanceState, now: float) -> None:
        """Start queued calls while the instance can take them; the queue policy picks."""
        queue = inst.queue
        while inst.up and len(queue) and inst.slots_free > 0 and inst.headroom > 0:
            cs = queue.select(inst, self.view)
            if cs is None:
                break
            need = cs.call.input_tokens
            if self.prefix_index is not None:
                _, per = self.prefix_index.match_by_instance(cs.call.prompt)
                need -= per.get(inst.name, 0)
            if need > inst.kv_free and inst.running:
                break  # wait for memory, as the engine would
            queue.remove(cs, released=True)
            cs.queued = False
            inst.running[cs.id] = cs
            cs.released = now
            if inst.engine_reports_capacity:
                inst.free_seqs -= 1
                inst.headroom -= need
                inst.kv_free -= need
            self._out.append(SendCall(cs.call, inst.name))

    @staticmethod
    def _unqueue(inst: InstanceState, cs: CallState) -> None:
        inst.queue.remove(cs, released=False)
        cs.queued = False

    def _take_running(self, call_id: int, instance: str) -> tuple[CallState, InstanceState] | None:
        """The running call an engine reports on, or None for stale reports (the call
        was cancelled or moved to another instance meanwhile)."""
        cs = self.calls.get(call_id)
        inst = self.instances.get(instance)
        if cs is None or inst is None or cs.instance != instance or call_id not in inst.running:
            return None
        del inst.running[call_id]
        inst.outstanding -= cs.t_comp
        self._dirty[inst] = None
        return cs, inst

    def _on_call_finished(self, ev: CallFinished) -> None:
        taken = self._take_running(ev.call_id, ev.instance)
        if taken is None:
            return
        cs, inst = taken
        call, qs = cs.call, cs.query
        inst.completed += 1
        if self.prefix_index is not None:
            # the engine holds the whole prompt now, even parts it evicted while the call waited
            self.prefix_index.add(call.prompt, inst.name, ev.time, count=False)
        self.predictor.observe(call.workflow, call.stage, ev.output_tokens)
        released = cs.released if cs.released is not None else ev.time
        inst.history.append(FinishedCall(
            call.id, call.workflow, call.stage, call.input_tokens, ev.output_tokens,
            ev.cached_tokens, cs.enqueued, released, ev.time, ev.first_token, cs.t_comp))
        if self.call_log is not None:
            self.call_log.append(CallRecord(
                call.id, call.query_id, call.workflow, call.stage, inst.name,
                call.input_tokens, ev.output_tokens, ev.cached_tokens, cs.ready, cs.enqueued,
                released, ev.started, ev.first_token, ev.time, ev.preemptions, cs.attempts + 1))
        del self.calls[call.id]
        del qs.inflight[call.id]
        qs.calls_done += 1
        self._advance(qs, call.node, NodeResult(output_tokens=ev.output_tokens, text=ev.text))

    def _on_call_failed(self, ev: CallFailed) -> None:
        taken = self._take_running(ev.call_id, ev.instance)
        if taken is None:
            return
        cs, inst = taken
        cs.attempts += 1
        if ev.retryable and cs.attempts <= self.max_retries:
            cs.excluded.add(inst.name)
            cs.released = None
            self._dispatch(cs)
        else:
            self._fail(cs.query, f"call {cs.call.stage!r} failed on {inst.name} after "
                                 f"{cs.attempts} attempt(s): {ev.reason}")

    def _on_op_finished(self, ev: OpFinished) -> None:
        entry = self._ops.pop(ev.op_id, None)
        if entry is None:
            return
        qs, key = entry
        self._advance(qs, key, NodeResult(error=ev.error, value=ev.result))

    # ------------------------------------------------------------------ instances

    def _add_instance(self, spec: InstanceSpec) -> InstanceState:
        prof = self._profile(spec)
        queue = self._queue_factory()
        inst = InstanceState(spec, prof.cost, queue, engine_reports_capacity=spec.backend == "sim")
        inst.kv_capacity = prof.kv_capacity
        bind = getattr(queue, "bind", None)
        if bind is not None:  # queue policies that read the view when a call is pushed
            bind(self.view)
        if inst.engine_reports_capacity:
            inst.free_seqs = spec.engine.max_num_seqs
            inst.headroom = spec.engine.token_budget
        self.instances[spec.name] = inst
        self._max_context[spec.name] = prof.max_context
        return inst

    def _on_instance_up(self, ev: InstanceUp) -> None:
        inst = self.instances.get(ev.spec.name)
        if inst is None or inst.spec != ev.spec:
            if inst is not None:
                self._evacuate(inst)
            inst = self._add_instance(ev.spec)
        inst.up = True
        self._dirty[inst] = None

    def _on_instance_down(self, ev: InstanceDown) -> None:
        inst = self.instances.get(ev.instance)
        if inst is not None and inst.up:
            self._evacuate(inst)

    def _evacuate(self, inst: InstanceState) -> None:
        """Move every call of a lost instance elsewhere (running ones are cancelled)."""
        inst.up = False
        moved = list(inst.queue)
        for cs in moved:
            self._unqueue(inst, cs)
        for cs in list(inst.running.values()):
            self._out.append(CancelCall(cs.id, inst.name))
            moved.append(cs)
        inst.running.clear()
        inst.outstanding = 0.0
        if self.prefix_index is not None:
            self.prefix_index.remove_instance(inst.name)
        for cs in moved:
            if cs.query.failed:
                continue
            cs.excluded.add(inst.name)
            cs.released = None
            self._dispatch(cs)


def _serves(inst: InstanceState, model: str | None) -> bool:
    return model is None or inst.spec.model.lower() == model.lower()
