"""The core's book of LLM calls and instances: tokenize, bind, queue, release, retry.

A ready call is tokenized (by the core's tokenizer, else by the driver: `Tokenize`), then bound to an instance by
the dispatch policy — at once (`binding = "ready"`) or, for a late-binding policy, from the ready pool when some
instance has room — and held in that instance's queue until the instance can start it: for an engine that reports
its admission state (free sequence slots, the next iteration's token budget, KV memory), when the engine says so;
otherwise up to `max_inflight`. The queue policy picks which queued call starts. Dispatch work is proportional to
the calls released. Calls move along `flowserve.core.lifecycle`; `tracked` holds the live ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core._instances import InstanceBook
from flowserve.core._leaders import PrefillLeaders, PrefillSharing
from flowserve.core._pool import ReadyPool
from flowserve.core.lifecycle import CallStatus
from flowserve.core.state import (
    CallState,
    FinishedCall,
    InstanceState,
    QueryState,
    join_queue,
    leave_queue,
)
from flowserve.core.tenants import TenantLedger
from flowserve.core.view import ClusterView
from flowserve.graph.nodes import LLMNode
from flowserve.graph.prompt import estimate_tokens
from flowserve.profiles.instance import InstanceProfile
from flowserve.profiles.predictor import OutputPredictor
from flowserve.tokenize.prompts import PromptTokenizer
from flowserve.types.commands import CancelCall, Command, SendCall, Tokenize
from flowserve.types.events import (
    CallFailed,
    CallFinished,
    InstanceCapacity,
    InstanceDown,
    InstanceUp,
    PrefillDone,
    Tokenized,
)
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, Tokens

if TYPE_CHECKING:
    from flowserve.core._kv import KVBook
    from flowserve.core.scheduler import SchedulerCore
    from flowserve.policies.base import DispatchPolicy
    from flowserve.policies.registry import QueueFactory

S = CallStatus


class CallBook:
    def __init__(self, core: SchedulerCore, dispatch: DispatchPolicy, queues: QueueFactory,
                 profile: Callable[[InstanceSpec], InstanceProfile], predictor: OutputPredictor,
                 prefix_index: PrefixIndex | None, tokenizer: PromptTokenizer, max_retries: int,
                 queries: dict[int, QueryState], sharing: PrefillSharing | None) -> None:
        self._end_call = core.fail_call
        self.dispatch = dispatch
        self.predictor = predictor
        self.prefix_index = prefix_index
        self.kv: KVBook  # the engines' cache events (set by the core)
        self.tokenizer = tokenizer
        self.max_retries = max_retries
        self.tracked: dict[int, CallState] = {}  # every live call (not final), by id
        self.tenants = TenantLedger()
        self.fleet = InstanceBook(profile, queues, self.tenants)
        self.instances = self.fleet.by_name
        self.view = self.fleet.view = ClusterView(self.instances, predictor, queries, prefix_index,
                                                  self.tenants.shares)
        self.late = dispatch.binding == "late"
        self.pool = ReadyPool(queues.cls.uses_deadline)
        # what an instance caches is known only with the router's index: without one, no leaders
        shared = sharing is not None and prefix_index is not None and dispatch.shares_prefills
        self.leaders = PrefillLeaders(sharing) if shared else None
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
        """True once the call has its token ids; False while the driver tokenizes it
        (WAITING) or when it failed its query (a prompt longer than every context)."""
        node = cs.node
        tokens = self.tokenizer.encode(node.prompt, node.model)
        if tokens is None:
            cs.move(S.WAITING)
            self.out.append(Tokenize(cs.id, cs.query.id, node.prompt, node.model))
            return False
        return self._make_call(cs, tokens)

    def _make_call(self, cs: CallState, tokens: Tokens) -> bool:
        node, q = cs.node, cs.query.query
        limit = self.fleet.max_context(node.model)
        if limit is not None and len(tokens) + 1 > limit:
            self._fail_call(cs, f"prompt of {len(tokens)} tokens (stage {node.stage!r}) exceeds the "
                                f"model's context of {limit} tokens")
            return False
        if not tokens:
            self._fail_call(cs, f"empty prompt (stage {node.stage!r})")
            return False
        cs.input_tokens = len(tokens)
        cs.call = LLMCall(cs.id, q.id, node.key, node.stage, q.workflow, tokens, cs.predicted_output,
                          node.max_tokens, node.model, q.tenant, q.priority, node.params,
                          cs.query.run.streams_parts(node.key), node.chat)
        return True

    def on_tokenized(self, ev: Tokenized) -> None:
        cs = self.tracked.get(ev.call_id)
        if cs is None or cs.status is not S.WAITING:
            return  # its query ended meanwhile
        if ev.tokens is None:
            self._fail_call(cs, f"cannot tokenize the prompt of stage {cs.stage!r}: {ev.error or 'no tokens'}")
            return
        cs.move(S.READY)
        if self._make_call(cs, ev.tokens):
            if self.late:
                self.pool.push(cs)
            else:
                self._dispatch(cs)

    def _fail_call(self, cs: CallState, reason: str) -> None:
        """The call cannot run: it fails, and so does its query (a program's, alone)."""
        if cs.status is S.WAITING and self.leaders is not None:
            self.leaders.forget(cs)
        cs.move(S.FAILED)
        self.drop(cs)
        self._end_call(cs, reason)

    # ------------------------------------------------------------------ binding

    def _choose(self, cs: CallState, candidates: list[InstanceState]) -> InstanceState:
        self.view._epoch += 1
        self.decisions += 1
        return self.dispatch.choose(cs, candidates, self.view)

    def _dispatch(self, cs: CallState) -> None:
        """Early binding: choose among every up instance serving the call's model."""
        candidates = self.fleet.candidates(cs)
        if not candidates:
            self._fail_call(cs, f"no instance is up that serves {cs.node.model or 'any model'}")
            return
        target = self._choose(cs, candidates)
        if not self._wait_for_leader(cs, target):
            self._bind(cs, target)

    def _bind(self, cs: CallState, inst: InstanceState) -> None:
        call = cs.call
        assert call is not None
        now = self.view.now
        cs.move(S.QUEUED)
        cs.instance = inst.name
        cs.enqueued = now
        cs.t_comp = self.view.t_comp(cs, inst)
        inst.outstanding += cs.t_comp
        inst.dispatched += 1
        join_queue(cs, inst, self.tenants)  # before the index learns of this prompt: queues may match it first
        if self.leaders is not None:
            self.leaders.lead(cs, call.input_tokens - self.view.cached_tokens(cs, inst))
        if self.prefix_index is not None:
            self.prefix_index.add(self.kv.routed_tokens(call.prompt, inst.name), inst.name, now)
        self.kv.routed(call, inst.name, now)
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
            if self._wait_for_leader(cs, target):
                continue
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
            assert call is not None and cs.status is S.QUEUED and cs.instance == inst.name
            need = call.input_tokens
            if self.prefix_index is not None:
                need -= self.prefix_index.match_by_instance(call.prompt)[1].get(inst.name, 0)
            if need > inst.kv_free and inst.running:
                break  # wait for memory, as the engine would
            leave_queue(cs, inst, released=True)
            cs.move(S.RELEASED)
            inst.running[cs.id] = cs
            cs.released = self.view.now
            self.tenants.started(call.tenant, max(need, 1))
            if reports:
                inst.free_seqs -= 1
                inst.headroom -= need
                inst.kv_free -= need
            self.out.append(SendCall(call, inst.name))

    # ------------------------------------------------------------------ shared prefills

    def _wait_for_leader(self, cs: CallState, target: InstanceState) -> bool:
        """Hold a call the policy would send to compute a long prefix `target` does not
        cache while another instance's leader is computing it (`_leaders`)."""
        if self.leaders is None:
            return False
        if self.leaders.follow(cs, target.name, self.view.cached_tokens(cs, target)) is None:
            return False
        cs.move(S.WAITING)
        return True

    def _release_followers(self, leader: CallState) -> None:
        """The leader's prefill is in its engine's cache (or it left the engine): its
        followers are dispatched anew, the policy now seeing where the prefix is cached."""
        if self.leaders is None:
            return
        for f in self.leaders.done(leader):
            f.move(S.READY)
            if self.late:
                self.pool.push(f)
            else:
                self._dispatch(f)

    def on_prefill_done(self, ev: PrefillDone) -> None:
        cs = self.running_on(ev.call_id, ev.instance)
        if cs is not None:
            if cs.status is S.RELEASED:
                cs.move(S.RUNNING)
            self._release_followers(cs)

    # ------------------------------------------------------------------ in-flight calls

    def running_on(self, call_id: int, instance: str) -> CallState | None:
        """The call in flight on `instance` this report is about, or None for a stale
        report (the call was cancelled or moved to another instance meanwhile)."""
        cs = self.tracked.get(call_id)
        if cs is None or cs.instance != instance or not cs.status.in_flight:
            return None
        assert call_id in self.instances[instance].running
        return cs

    def on_progress(self, cs: CallState) -> None:
        if cs.status is S.RELEASED:
            cs.move(S.RUNNING)

    def take_running(self, call_id: int, instance: str) -> tuple[CallState, InstanceState] | None:
        """The in-flight call an engine reports on, taken off its instance."""
        cs = self.running_on(call_id, instance)
        if cs is None:
            return None
        inst = self.instances[instance]
        del inst.running[call_id]
        inst.outstanding -= cs.t_comp
        self._dirty[inst] = None
        self._release_followers(cs)
        return cs, inst

    def on_finished(self, cs: CallState, inst: InstanceState, ev: CallFinished) -> None:
        call = cs.call
        assert call is not None
        cs.move(S.FINISHED)
        if self.prefix_index is not None and self.kv.keeps_estimate(inst.name):
            # the engine holds the whole prompt now, even parts it evicted while the call waited
            self.prefix_index.add(call.prompt, inst.name, ev.time, count=False)
        self.predictor.observe(call.workflow, call.stage, ev.output_tokens)
        self.tenants.finished(call.tenant, ev.output_tokens)
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
            cs.excluded |= {inst.name}
            self._redispatch(cs)
        else:
            self._fail_call(cs, f"call {cs.stage!r} failed on {inst.name} after "
                                f"{cs.attempts} attempt(s): {ev.reason}")

    def _redispatch(self, cs: CallState) -> None:
        cs.move(S.READY)
        cs.released = None
        cs.instance = None
        if self.late:
            self.pool.push(cs)
        else:
            self._dispatch(cs)

    def drop(self, cs: CallState) -> None:
        """Forget a call of an ended query wherever it is (an in-flight one is cancelled)."""
        inst = self.instances.get(cs.instance) if cs.instance else None
        if cs.status.in_flight:
            assert inst is not None
            del inst.running[cs.id]
            self.out.append(CancelCall(cs.id, inst.name))
            self._dirty[inst] = None
            inst.outstanding -= cs.t_comp
            self._release_followers(cs)
        elif cs.status is S.WAITING and self.leaders is not None:
            self.leaders.forget(cs)
        elif cs.status is S.QUEUED:
            assert inst is not None
            leave_queue(cs, inst, released=False)
            inst.outstanding -= cs.t_comp
            self._release_followers(cs)
        if not cs.status.final:
            cs.move(S.CANCELLED)
        self.pool.discard(cs)
        self.tracked.pop(cs.id, None)

    # ------------------------------------------------------------------ instances

    def on_capacity(self, ev: InstanceCapacity) -> None:
        inst = self.fleet.capacity(ev)
        if inst is not None:
            self._dirty[inst] = None

    def on_instance_up(self, ev: InstanceUp) -> None:
        inst = self.instances.get(ev.spec.name)
        if inst is None or inst.spec != ev.spec:
            if inst is not None:
                self._evacuate(inst)
            inst = self.fleet.add(ev.spec)
        inst.up = True
        self.fleet.changed()
        self._dirty[inst] = None

    def on_instance_down(self, ev: InstanceDown) -> None:
        inst = self.instances.get(ev.instance)
        if inst is not None and inst.up:
            self._evacuate(inst)

    def _evacuate(self, inst: InstanceState) -> None:
        """Move every call of a lost instance elsewhere (in-flight ones are cancelled)."""
        inst.up = False
        self.fleet.changed()
        moved = list(inst.queue)
        for cs in moved:
            leave_queue(cs, inst, released=False)
        for cs in list(inst.running.values()):
            self.out.append(CancelCall(cs.id, inst.name))
            moved.append(cs)
        inst.running.clear()
        for cs in moved:
            self._release_followers(cs)
        inst.outstanding = inst.peer_outstanding
        if self.prefix_index is not None:
            self.prefix_index.remove_instance(inst.name)
        for cs in moved:
            if not cs.query.failed:
                cs.excluded |= {inst.name}
                self._redispatch(cs)
