"""The core's book of LLM calls and instances: tokenize, bind, queue, release, retry.

A ready call is tokenized (by the core's tokenizer, else by the driver: `Tokenize`),
then bound to an instance by the dispatch policy — at once (`binding = "ready"`) or,
for a late-binding policy, from the ready pool when some instance has room — and held
in that instance's queue until the instance can start it: for an engine that reports
its admission state (free sequence slots, the next iteration's token budget, KV
memory), when the engine says so; otherwise up to `max_inflight`. The queue policy
picks which queued call starts. Dispatch work is proportional to the calls released.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.pool import ReadyPool
from flowserve.core.state import CallState, FinishedCall, InstanceState, QueryState
from flowserve.core.view import ClusterView
from flowserve.graph.nodes import LLMNode
from flowserve.graph.prompt import estimate_tokens
from flowserve.policies.base import DispatchPolicy, QueuePolicy
from flowserve.profiles.instance import InstanceProfile
from flowserve.profiles.predictor import OutputPredictor
from flowserve.tokenize.prompts import PromptTokenizer
from flowserve.types.commands import CancelCall, Command, SendCall, Tokenize
from flowserve.types.events import CallFailed, CallFinished, InstanceCapacity, InstanceDown, InstanceUp, Tokenized
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, Tokens

if TYPE_CHECKING:
    from flowserve.core.scheduler import SchedulerCore


class CallBook:
    def __init__(self, core: SchedulerCore, dispatch: DispatchPolicy, queue_factory: Callable[[], QueuePolicy],
                 profile: Callable[[InstanceSpec], InstanceProfile], predictor: OutputPredictor,
                 prefix_index: PrefixIndex | None, tokenizer: PromptTokenizer, max_retries: int,
                 pool_by_deadline: bool) -> None:
        self._fail = core.fail_query
        self.dispatch = dispatch
        self._queue_factory = queue_factory
        self._profile = profile
        self.predictor = predictor
        self.prefix_index = prefix_index
        self.tokenizer = tokenizer
        self.max_retries = max_retries
        self.instances: dict[str, InstanceState] = {}
        self.tracked: dict[int, CallState] = {}
        self.view = ClusterView(self.instances, predictor, core.queries, prefix_index)
        self.late = getattr(dispatch, "binding", "ready") == "late"
        self.pool = ReadyPool(pool_by_deadline)
        self._awaiting: dict[int, CallState] = {}  # Tokenize sent to the driver
        self._limits: dict[str | None, int | None] = {}  # max context per model
        self._seq = 0
        self.decisions = 0
        # instances whose queue or capacity changed (a dict: release order is deterministic)
        self._dirty: dict[InstanceState, None] = {}
        self.out: list[Command] = []

    # ------------------------------------------------------------------ ready calls

    def ready(self, qs: QueryState, node: LLMNode, call_id: int, now: float) -> None:
        q = qs.query
        predicted = min(self.predictor.predict_call(q.id, node.key, q.workflow, node.stage), node.max_tokens)
        self._seq += 1
        cs = CallState(call_id, node, qs, now, estimate_tokens(node.prompt), predicted, self._seq)
        qs.inflight[cs.id] = cs
        self.tracked[cs.id] = cs
        if self.late:
            self.pool.push(cs)  # tokenized when bound: pooled calls hold no token lists
        elif self._tokenize(cs):
            self._dispatch(cs)

    def _tokenize(self, cs: CallState) -> bool:
        """True once the call has its token ids; False while the driver tokenizes it or
        when its query failed (a prompt longer than every serving instance's context)."""
        node = cs.node
        tokens = self.tokenizer.encode(node.prompt, node.model)
        if tokens is None:
            self._awaiting[cs.id] = cs
            self.out.append(Tokenize(cs.id, cs.query.id, node.prompt, node.model))
            return False
        return self._make_call(cs, tokens)

    def _make_call(self, cs: CallState, tokens: Tokens) -> bool:
        node, q = cs.node, cs.query.query
        limit = self._max_context(node.model)
        if limit is not None and len(tokens) + 1 > limit:
            self._fail(cs.query, f"prompt of {len(tokens)} tokens (stage {node.stage!r}) exceeds the "
                                 f"model's context of {limit} tokens")
            return False
        if not tokens:
            self._fail(cs.query, f"empty prompt (stage {node.stage!r})")
            return False
        cs.input_tokens = len(tokens)
        cs.call = LLMCall(cs.id, q.id, node.key, node.stage, q.workflow, tokens, cs.predicted_output,
                          node.max_tokens, node.model, q.tenant, q.priority, node.params,
                          cs.query.run.streams_parts(node.key), node.chat)
        return True

    def on_tokenized(self, ev: Tokenized) -> None:
        cs = self._awaiting.pop(ev.call_id, None)
        if cs is None or cs.query.failed:
            return
        if ev.tokens is None:
            self._fail(cs.query, f"cannot tokenize the prompt of stage {cs.stage!r}: {ev.error or 'no tokens'}")
        elif self._make_call(cs, ev.tokens):
            if self.late:
                self.pool.push(cs)
            else:
                self._dispatch(cs)

    def _max_context(self, model: str | None) -> int | None:
        if model not in self._limits:
            known = [i.max_context for i in self.instances.values() if i.serves(model) and i.max_context]
            self._limits[model] = min(known) if known else None
        return self._limits[model]

    # ------------------------------------------------------------------ binding

    def _choose(self, cs: CallState, candidates: list[InstanceState]) -> InstanceState:
        self.view.epoch += 1
        self.decisions += 1
        return self.dispatch.choose(cs, candidates, self.view)

    def _dispatch(self, cs: CallState) -> None:
        """Early binding: choose among every up instance serving the call's model."""
        serving = [i for i in self.instances.values() if i.up and i.serves(cs.node.model)]
        candidates = [i for i in serving if i.name not in cs.excluded] or serving
        if not candidates:
            self._fail(cs.query, f"no instance is up that serves {cs.node.model or 'any model'}")
            return
        self._bind(cs, self._choose(cs, candidates))

    def _bind(self, cs: CallState, inst: InstanceState) -> None:
        call = cs.call
        assert call is not None
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

    def _bind_pooled(self) -> None:
        """Late binding: while some instance has room, hand it the pool's next call it
        serves; the dispatch policy chooses among the instances with room."""
        roomy = [i for i in self.instances.values() if i.has_room]
        while roomy and len(self.pool):
            cs = self.pool.pop_for(roomy[0])
            if cs is None:
                roomy.pop(0)
                continue
            if cs.call is None and not self._tokenize(cs):
                continue
            candidates = [i for i in roomy if i.serves(cs.node.model) and i.name not in cs.excluded] or roomy[:1]
            target = self._choose(cs, candidates)
            self._bind(cs, target)
            del self._dirty[target]
            self._release(target)
            roomy = [i for i in roomy if i.has_room]

    def release_all(self) -> None:
        while True:
            while self._dirty:
                inst = next(iter(self._dirty))
                del self._dirty[inst]
                self._release(inst)
            if not (self.late and len(self.pool)):
                return
            self._bind_pooled()
            if not self._dirty:
                return

    def _release(self, inst: InstanceState) -> None:
        """Start queued calls while the instance can take them; the queue policy picks."""
        queue = inst.queue
        reports = inst.spec.reports_capacity
        while inst.up and len(queue) and inst.slots_free > 0 and inst.headroom > 0:
            cs = queue.select(inst, self.view)
            if cs is None:
                break
            call = cs.call
            assert call is not None
            need = call.input_tokens
            if self.prefix_index is not None:
                need -= self.prefix_index.match_by_instance(call.prompt)[1].get(inst.name, 0)
            if need > inst.kv_free and inst.running:
                break  # wait for memory, as the engine would
            queue.remove(cs, released=True)
            cs.queued = False
            inst.running[cs.id] = cs
            cs.released = self.view.now
            self.view.tenants.started(call.tenant, max(need, 1))
            if reports:
                inst.free_seqs -= 1
                inst.headroom -= need
                inst.kv_free -= need
            self.out.append(SendCall(call, inst.name))

    # ------------------------------------------------------------------ running calls

    def running_on(self, call_id: int, instance: str) -> CallState | None:
        cs = self.tracked.get(call_id)
        inst = self.instances.get(instance)
        if cs is None or inst is None or cs.instance != instance or call_id not in inst.running:
            return None
        return cs

    def take_running(self, call_id: int, instance: str) -> tuple[CallState, InstanceState] | None:
        """The running call an engine reports on, or None for stale reports (the call
        was cancelled or moved to another instance meanwhile)."""
        cs = self.running_on(call_id, instance)
        if cs is None:
            return None
        inst = self.instances[instance]
        del inst.running[call_id]
        inst.outstanding -= cs.t_comp
        self._dirty[inst] = None
        return cs, inst

    def on_finished(self, cs: CallState, inst: InstanceState, ev: CallFinished) -> None:
        call = cs.call
        assert call is not None
        if self.prefix_index is not None:
            # the engine holds the whole prompt now, even parts it evicted while the call waited
            self.prefix_index.add(call.prompt, inst.name, ev.time, count=False)
        self.predictor.observe(call.workflow, call.stage, ev.output_tokens)
        self.view.tenants.finished(call.tenant, ev.output_tokens)
        released = cs.released if cs.released is not None else ev.time
        inst.history.append(FinishedCall(
            call.id, call.workflow, call.stage, call.input_tokens, ev.output_tokens,
            ev.cached_tokens, cs.enqueued, released, ev.time, ev.first_token, cs.t_comp))
        del self.tracked[cs.id]

    def on_failed(self, ev: CallFailed) -> None:
        taken = self.take_running(ev.call_id, ev.instance)
        if taken is None:
            return
        cs, inst = taken
        cs.attempts += 1
        if ev.retryable and cs.attempts <= self.max_retries:
            cs.excluded.add(inst.name)
            self._redispatch(cs)
        else:
            self._fail(cs.query, f"call {cs.stage!r} failed on {inst.name} after "
                                 f"{cs.attempts} attempt(s): {ev.reason}")

    def _redispatch(self, cs: CallState) -> None:
        cs.released = None
        cs.instance = None
        if self.late:
            self.pool.push(cs)
        else:
            self._dispatch(cs)

    def drop(self, cs: CallState) -> None:
        """Forget a call of a failed query wherever it is (a running one is cancelled)."""
        inst = self.instances.get(cs.instance) if cs.instance else None
        if inst is not None:
            if cs.id in inst.running:
                del inst.running[cs.id]
                self.out.append(CancelCall(cs.id, inst.name))
                self._dirty[inst] = None
                inst.outstanding -= cs.t_comp
            elif cs.queued:
                inst.queue.remove(cs, released=False)
                cs.queued = False
                inst.outstanding -= cs.t_comp
        self.pool.discard(cs)
        self._awaiting.pop(cs.id, None)
        self.tracked.pop(cs.id, None)

    # ------------------------------------------------------------------ instances

    def add_instance(self, spec: InstanceSpec) -> InstanceState:
        prof = self._profile(spec)
        queue = self._queue_factory()
        inst = InstanceState(spec, prof.cost, queue)
        inst.kv_capacity = prof.kv_capacity
        inst.max_context = prof.max_context
        bind = getattr(queue, "bind", None)
        if bind is not None:  # queue policies that read the view when a call is pushed
            bind(self.view)
        self.instances[spec.name] = inst
        self._limits.clear()
        return inst

    def on_capacity(self, ev: InstanceCapacity) -> None:
        inst = self.instances.get(ev.instance)
        if inst is not None:
            inst.free_seqs = ev.free_seqs
            inst.headroom = ev.headroom_tokens
            inst.kv_free = ev.kv_free_tokens
            self._dirty[inst] = None

    def on_instance_up(self, ev: InstanceUp) -> None:
        inst = self.instances.get(ev.spec.name)
        if inst is None or inst.spec != ev.spec:
            if inst is not None:
                self._evacuate(inst)
            inst = self.add_instance(ev.spec)
        inst.up = True
        self._dirty[inst] = None

    def on_instance_down(self, ev: InstanceDown) -> None:
        inst = self.instances.get(ev.instance)
        if inst is not None and inst.up:
            self._evacuate(inst)

    def _evacuate(self, inst: InstanceState) -> None:
        """Move every call of a lost instance elsewhere (running ones are cancelled)."""
        inst.up = False
        moved = list(inst.queue)
        for cs in moved:
            inst.queue.remove(cs, released=False)
            cs.queued = False
        for cs in list(inst.running.values()):
            self.out.append(CancelCall(cs.id, inst.name))
            moved.append(cs)
        inst.running.clear()
        inst.outstanding = 0.0
        if self.prefix_index is not None:
            self.prefix_index.remove_instance(inst.name)
        for cs in moved:
            if not cs.query.failed:
                cs.excluded.add(inst.name)
                self._redispatch(cs)
