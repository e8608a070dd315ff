"""The sans-IO scheduler core: events in, plain-data commands out; no IO, no clock.

It runs every query's workflow graph, tokenizes each ready LLM call's prompt (or asks
the driver to), binds it to an instance (global dispatch policy) — at once, or, for a
late-binding policy, when an instance has room — holds it in that instance's queue and
releases it when the instance can start it (local queue policy decides which). Both
drivers — the virtual-time simulator and the live gateway — feed it the same events.

Drivers use only `handle` and the query API below (`instance_status`, `is_current`,
`prefix_hit`, `keeps_prefix_index`, `indexed_tokens`, `predicted_wait_s`, `max_context`, `tick_s`,
`open_queries`, `open_calls`, `call_status`, `calls_of`, `decisions`, `wants_prefill_done`, `finished_calls`,
`dispatch_stats`, `decide`, `kv_views`, `kv_index`); everything else is private.

Invariant: every query that arrives ends in exactly one QueryDone or QueryFailed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from flowserve.cache.block_index import IndexStats
from flowserve.cache.prefix_index import DEFAULT_WINDOW_S, PrefixIndex
from flowserve.core._binding import CallEnds
from flowserve.core._calls import CallBook
from flowserve.core._kv import KVBook, KVSettings, KVViewStatus
from flowserve.core._leaders import DEFAULT_SHARING, PrefillSharing
from flowserve.core._ops import OpBook, QueryEnds
from flowserve.core._peers import PeerBook
from flowserve.core._runs import RunBook
from flowserve.core.lifecycle import CallStatus
from flowserve.core.records import CallRecord, InstanceStatus
from flowserve.core.state import QueryState
from flowserve.graph.passes import GraphPass
from flowserve.graph.registry import WorkflowFactory, WorkflowRegistry
from flowserve.profiles.instance import InstanceProfile
from flowserve.profiles.predictor import OutputPredictor
from flowserve.tokenize.prompts import NoText, PromptTokenizer
from flowserve.types.commands import Command
from flowserve.types.events import (
    CallCancelled,
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
    QueryClosed,
    QueryInput,
    Tick,
    Tokenized,
)
from flowserve.types.kv import KVCacheEvents, KVViewChanged, SlotsResident
from flowserve.types.peers import InstanceLoad, PeerLoad, PeerRouted, PeerService, ProgramShared
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import Tokens

if TYPE_CHECKING:
    from flowserve.core.policy import DispatchPolicy, DriverServices, QueueFactory


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
        kv: KVSettings | None = None,
        *,
        workflows: Mapping[str, WorkflowFactory] | None = None,
        services: DriverServices | None = None,
    ) -> None:
        """prefill_sharing: when a call waits for another's prefill of the long prefix they
        share (`flowserve.core._leaders`); None: never. kv: the block index of the engines'
        cache events (`flowserve.core._kv`), kept when an instance publishes them.
        workflows: the factories that build each query's workflow from its `WorkflowRef`
        (the driver's registry). services: what the driver offers the policies
        (`DispatchPolicy.attach`)."""
        self._dispatch = dispatch
        if services is not None:
            dispatch.attach(services)
        self._predictor = predictor or OutputPredictor()
        self._queries: dict[int, QueryState] = {}
        # the index is kept when the dispatch or the queue policy reads it
        prefix_index = None
        if dispatch.needs_prefix_index or queue.cls.needs_prefix_index:
            window = dispatch.prefix_window_s
            prefix_index = PrefixIndex(DEFAULT_WINDOW_S if window is None else window)
        predictor = self._predictor
        self._kv = kv_book = KVBook(prefix_index, kv or KVSettings(), self._instance_of_call)

        def call_book(ends: CallEnds) -> CallBook:
            return CallBook(ends, dispatch, queue, profile, predictor, prefix_index, tokenizer or NoText(),
                            max_retries, self._queries, prefill_sharing, kv_book)

        def op_book(ends: QueryEnds) -> OpBook:  # non-LLM engines (embedding, reranker, ...) batch their ops
            return OpBook(ends, queue.cls.order_key, [s for s in instances if s.kind != "llm"])

        registry = workflows if isinstance(workflows, WorkflowRegistry) else WorkflowRegistry(workflows)
        self._runs = runs = RunBook(self._queries, registry, call_book, op_book, passes, record_calls)
        self._calls = calls = runs.calls
        self._opbook = runs.opbook
        self._view = calls.view
        for spec in instances:
            if spec.kind == "llm":
                calls.fleet.add(spec)
                kv_book.add(spec)
        self._peers = peers = PeerBook(calls.fleet, calls.tenants, self._queries, calls.prefix_index,
                                       calls.slots_changed, kv_book.precise)
        self._handlers: Mapping[type, Callable[[Any], list[Command]]] = {
            CallFinished: runs.call_finished,
            CallProgress: runs.progress,
            PrefillDone: calls.on_prefill_done,
            InstanceCapacity: calls.on_capacity,
            QueryArrived: runs.arrive,
            QueryInput: runs.input,
            QueryClosed: runs.close,
            QueryCancelled: runs.cancel_query,
            CallCancelled: runs.cancel,
            OpFinished: runs.op_finished,
            CallFailed: calls.on_failed,
            Tokenized: calls.on_tokenized,
            PrefixEvicted: self._on_evicted,
            InstanceDown: self._on_instance_down,
            InstanceUp: self._on_instance_up,
            KVCacheEvents: self._on_kv_events,
            KVViewChanged: self._on_kv_view,
            SlotsResident: self._on_kv_slots,
            Tick: _ignore,
            JobFinished: _ignore,  # policies see it in `observe`
            PeerLoad: peers.on_load,
            PeerRouted: peers.on_routed,
            PeerService: peers.on_service,
            ProgramShared: peers.on_program,
        }

    # ------------------------------------------------------------------ entry point

    def handle(self, event: Event) -> list[Command]:
        handler = self._handlers.get(type(event))
        if handler is None:
            raise TypeError(f"unknown event {event!r}")
        self._view.advance(event.time)
        self._kv.expire(event.time)
        out = handler(event)
        for more in (self._dispatch.observe(event, self._view), self._calls.release_all(),
                     self._opbook.release_all()):
            if more:
                out.extend(more)
        return out

    # ------------------------------------------------------------------ query API (drivers)

    def instance_status(self) -> list[InstanceStatus]:
        return [InstanceStatus(i.name, i.spec, i.up, len(i.queue), len(i.running), max(i.outstanding, 0.0),
                               i.dispatched, i.completed) for i in self._calls.instances.values()]

    def own_load(self) -> tuple[InstanceLoad, ...]:
        """This replica's own share of each LLM instance's load (what it tells its peers)."""
        return tuple(InstanceLoad(i.name, len(i.running), len(i.queue), max(i.outstanding - i.peer_outstanding, 0.0))
                     for i in self._calls.instances.values())

    def tenant_costs(self) -> Mapping[str, float]:
        """The service this replica gave each tenant, in VTC cost units (its totals)."""
        return MappingProxyType(self._calls.tenants.costs)

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
        waits = [self._view.queueing_delay_s(i) for i in self._calls.instances.values()
                 if i.up and i.serves(model)]
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
        return list(self._runs.call_log or ())

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
        return self._calls.choose(cs, candidates).name

    # ------------------------------------------------------------------ instances and caches

    def kv_views(self) -> list[KVViewStatus]:
        """Per instance with cache events: precise or estimated, and why (empty without)."""
        return self._kv.views()

    def kv_index(self) -> tuple[int, IndexStats] | None:
        """The block index's bytes and counters (None without instances that publish events)."""
        return (self._kv.bytes, self._kv.stats) if self._kv.publishing() else None

    def _on_kv_events(self, ev: KVCacheEvents) -> list[Command]:
        self._kv.on_events(ev)
        return []

    def _on_kv_view(self, ev: KVViewChanged) -> list[Command]:
        self._kv.on_view(ev)
        return []

    def _on_kv_slots(self, ev: SlotsResident) -> list[Command]:
        self._kv.on_slots(ev)
        return []

    def _instance_of_call(self, call_id: int) -> str | None:
        """Where a live call is queued or runs (None: nowhere, or ended)."""
        cs = self._calls.tracked.get(call_id)
        return None if cs is None else cs.instance

    def _on_evicted(self, ev: PrefixEvicted) -> list[Command]:
        if not self._kv.keeps_estimate(ev.instance):
            return []  # the engine's own events say what it evicted
        if self._calls.prefix_index is not None:
            self._calls.prefix_index.discard(ev.instance, ev.tokens, ev.start, ev.time)
        return []

    def _on_instance_down(self, ev: InstanceDown) -> list[Command]:
        if ev.instance in self._opbook.instances:
            return self._opbook.instance_down(ev.instance)
        return self._calls.on_instance_down(ev)

    def _on_instance_up(self, ev: InstanceUp) -> list[Command]:
        if ev.spec.kind != "llm":
            return self._runs.op_instance_up(ev)
        out = self._calls.on_instance_up(ev)
        inst = self._calls.instances.get(ev.spec.name)
        if inst is not None:
            self._peers.refresh(inst)
        self._kv.add(ev.spec)
        return out


def _ignore(event: Event) -> list[Command]:
    """Events only policies watch (ticks, finished jobs)."""
    return []
