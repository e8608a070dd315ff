"""Binding LLM calls to instances: tokenize, choose, queue, release.

A ready call is tokenized (by the core's tokenizer, else by the driver: `Tokenize`),
then bound to an instance by the dispatch policy — at once (`binding = "ready"`) or,
for a late-binding policy, from the ready pool when some instance has room — and held
in that instance's queue until the instance can start it: for an engine that reports
its admission state (free sequence slots, the next iteration's token budget, KV
memory), when the engine says so; otherwise up to `max_inflight`. The queue policy
picks which queued call starts. Dispatch work is proportional to the calls released.
A call the policy would send to compute a long prefix another instance is computing
waits for that prefill (`flowserve.core._leaders`).

Each public method answers with the commands it caused, in the order they were made; a
call that cannot run goes to `ends` (the run book), which decides what that ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core._instances import InstanceBook
from flowserve.core._kv import KVBook
from flowserve.core._leaders import PrefillLeaders, PrefillSharing
from flowserve.core._pool import ReadyPool
from flowserve.core.lifecycle import CallStatus
from flowserve.core.outbox import Outbox
from flowserve.core.state import CallState, InstanceState, QueryState, join_queue, leave_queue
from flowserve.core.tenants import TenantLedger
from flowserve.errors import FailureKind
from flowserve.graph.nodes import LLMNode
from flowserve.graph.prompt import estimate_tokens
from flowserve.profiles.instance import InstanceProfile
from flowserve.profiles.predictor import OutputPredictor
from flowserve.tokenize.prompts import PromptTokenizer
from flowserve.types.commands import CancelCall, Command, SendCall, Tokenize
from flowserve.types.events import Tokenized
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, Tokens

if TYPE_CHECKING:
    from flowserve.core.policy import DispatchPolicy, QueueFactory

S = CallStatus


class CallEnds(Protocol):
    """Who decides what a call that cannot run ends (the run book: the call alone in a
    program, else its query)."""

    def end_call(self, cs: CallState, reason: str, kind: FailureKind) -> list[Command]: ...


class Binder:

    def __init__(self, ends: CallEnds, dispatch: DispatchPolicy, queues: QueueFactory,
                 profile: Callable[[InstanceSpec], InstanceProfile], predictor: OutputPredictor,
                 prefix_index: PrefixIndex | None, tokenizer: PromptTokenizer, max_retries: int,
                 queries: dict[int, QueryState], sharing: PrefillSharing | None, kv: KVBook) -> None:
        """kv: the engines' cache events (`flowserve.core._kv`), which decide what a routed
        prompt and a finished call teach the router's index."""
        self._ends = ends
        self.dispatch = dispatch
        self.predictor = predictor
        self.prefix_index = prefix_index
        self.kv = kv
        self.tokenizer = tokenizer
        self.max_retries = max_retries
        self.tracked: dict[int, CallState] = {}  # every live call (not final), by id
        self.tenants = TenantLedger()
        self.fleet = InstanceBook(profile, queues, self.tenants, predictor, queries, prefix_index, kv)
        self.instances = self.fleet.by_name
        self.view = self.fleet.view
        self.late = dispatch.binding == "late"
        self.pool = ReadyPool(queues.cls.uses_deadline)
        # what an instance caches is known only with the router's index: without one, no leaders
        shared = sharing is not None and prefix_index is not None and dispatch.shares_prefills
        self.leaders = PrefillLeaders(sharing) if shared else None
        self._seq = 0
        self.decisions = 0
        # instances whose queue or capacity changed (a dict: release order is deterministic)
        self._dirty: dict[InstanceState, None] = {}
        self._out = Outbox()

    # ------------------------------------------------------------------ ready calls

    def ready(self, qs: QueryState, node: LLMNode, call_id: int, now: float) -> list[Command]:
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
        return self._out.take()

    def _tokenize(self, cs: CallState) -> bool:
        """True once the call has its token ids; False while the driver tokenizes it
        (WAITING) or when it failed its query (a prompt longer than every context)."""
        node = cs.node
        tokens = self.tokenizer.encode(node.prompt, node.model)
        if tokens is None:
            cs.move(S.WAITING)
            self._out.append(Tokenize(cs.id, cs.query.id, node.prompt, node.model))
            return False
        return self._make_call(cs, tokens)

    def _make_call(self, cs: CallState, tokens: Tokens) -> bool:
        node, q = cs.node, cs.query.query
        limit = self.fleet.max_context(node.model)
        if limit is not None and len(tokens) + 1 > limit:
            self._fail_call(cs, f"prompt of {len(tokens)} tokens (stage {node.stage!r}) exceeds the "
                                f"model's context of {limit} tokens", FailureKind.CONTEXT_OVERFLOW)
            return False
        if not tokens:
            self._fail_call(cs, f"empty prompt (stage {node.stage!r})", FailureKind.BAD_REQUEST)
            return False
        cs.tokenized(LLMCall(cs.id, q.id, node.key, node.stage, q.workflow, tokens, cs.predicted_output,
                             node.max_tokens, node.model, q.tenant, q.priority, node.params,
                             cs.query.run.streams_parts(node.key), node.chat))
        return True

    def on_tokenized(self, ev: Tokenized) -> list[Command]:
        cs = self.tracked.get(ev.call_id)
        if cs is None or cs.status is not S.WAITING:
            return []  # its query ended meanwhile
        if ev.tokens is None:
            self._fail_call(cs, f"cannot tokenize the prompt of stage {cs.stage!r}: {ev.error or 'no tokens'}",
                            ev.kind)
        else:
            cs.move(S.READY)
            if self._make_call(cs, ev.tokens):
                self._bind_or_pool(cs)
        return self._out.take()

    def _fail_call(self, cs: CallState, reason: str, kind: FailureKind) -> None:
        """The call cannot run: it fails, and so does its query (a program's, alone)."""
        if cs.status is S.WAITING and self.leaders is not None:
            self.leaders.forget(cs)
        cs.move(S.FAILED)
        self._drop(cs)
        self._out.extend(self._ends.end_call(cs, reason, kind))

    # ------------------------------------------------------------------ binding

    def choose(self, cs: CallState, candidates: list[InstanceState]) -> InstanceState:
        """The dispatch policy's choice among the candidates: one decision, counted."""
        self.view.next_decision()
        self.decisions += 1
        return self.dispatch.choose(cs, candidates, self.view)

    def _bind_or_pool(self, cs: CallState) -> None:
        """A tokenized READY call: to the pool (late binding), else dispatched now."""
        if self.late:
            self.pool.push(cs)
        else:
            self._dispatch(cs)

    def _dispatch(self, cs: CallState) -> None:
        """Early binding: choose among every up instance serving the call's model."""
        candidates = self.fleet.candidates(cs)
        if not candidates:
            self._fail_call(cs, f"no instance is up that serves {cs.node.model or 'any model'}",
                            FailureKind.NO_INSTANCE)
            return
        target = self.choose(cs, candidates)
        if not self._wait_for_leader(cs, target):
            self._bind(cs, target)

    def _bind(self, cs: CallState, inst: InstanceState) -> None:
        call = cs.call
        assert call is not None
        now = self.view.now
        cs.bind(inst.name, now, self.view.t_comp(cs, inst))
        inst.bound(cs)
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
            target = self.choose(cs, candidates)
            if self._wait_for_leader(cs, target):
                continue
            self._bind(cs, target)
            del self._dirty[target]
            self._release(target)
            roomy = [i for i in roomy if i.has_room]

    def release_all(self) -> list[Command]:
        """Start what the instances whose queue or capacity changed can take now (and, late
        binding, bind pooled calls to instances with room)."""
        while True:
            while self._dirty:
                inst = next(iter(self._dirty))
                del self._dirty[inst]
                self._release(inst)
            if not (self.late and len(self.pool)):
                return self._out.take()
            self._bind_pooled()
            if not self._dirty:
                return self._out.take()

    def _release(self, inst: InstanceState) -> None:
        """Start queued calls while the instance can take them; the queue policy picks."""
        queue = inst.queue
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
            cs.release(self.view.now)
            inst.start(cs, need)
            self.tenants.started(call.tenant, max(need, 1))
            self._out.append(SendCall(call, inst.name))

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
            self._bind_or_pool(f)

    # ------------------------------------------------------------------ dropping calls

    def _drop(self, cs: CallState) -> None:
        inst = self.instances.get(cs.instance) if cs.instance else None
        if cs.status.in_flight:
            assert inst is not None
            inst.stop(cs)
            self._out.append(CancelCall(cs.id, inst.name))
            self._dirty[inst] = None
            self._release_followers(cs)
        elif cs.status is S.WAITING and self.leaders is not None:
            self.leaders.forget(cs)
        elif cs.status is S.QUEUED:
            assert inst is not None
            leave_queue(cs, inst, released=False)
            inst.drop_work(cs.t_comp)
            self._release_followers(cs)
        if not cs.status.final:
            cs.move(S.CANCELLED)
        self.pool.discard(cs)
        self.tracked.pop(cs.id, None)
