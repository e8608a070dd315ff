"""Replicas in the simulator: N scheduler cores routing to one simulated cluster, each
deciding from its own view and syncing with the others every `sync_s`, through the very
exchange the live replicas run (`flowserve.replicas.exchange`), so `flowserve simulate
--replicas N --sync-ms D` predicts what a sync period costs: hit rate, attainment, fairness.

`ReplicaCores` stands where the simulator expects one core. Queries go to the replicas in
turn (a client spreading requests round-robin: no affinity, the worst case); a whole
query stays on its replica. Each core numbers its calls, ops and jobs itself, so their ids
are mapped to ids unique in the cluster on the way to the engines and back. What engines
report about themselves (capacity, evictions, up/down) goes to every core, as every live
replica watches the engines it routes to. Replica i syncs at i·sync_s/N, then every
sync_s: it publishes its report and the prompts it routed since its last sync, then reads
its peers' latest reports and the prompts they published (as a live replica does at each
tick of its sync loop).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from flowserve.core.records import CallRecord, InstanceStatus
from flowserve.core.scheduler import SchedulerCore
from flowserve.replicas.blocks import RouteEntry
from flowserve.replicas.exchange import Exchange
from flowserve.replicas.peers import Report
from flowserve.types.commands import (
    CancelCall,
    Command,
    PolicyChanged,
    QueryDone,
    QueryFailed,
    RunBatch,
    RunJob,
    RunOp,
    SendCall,
    StepDone,
    Tokenize,
)
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


class ReplicaCores:
    def __init__(self, cores: Sequence[SchedulerCore], sync_s: float) -> None:
        assert len(cores) >= 1 and sync_s > 0
        self.cores = list(cores)
        self.sync_s = sync_s
        n = len(cores)
        self.exchanges = [Exchange(f"replica-{i}") for i in range(n)]
        self._share_routes = cores[0].keeps_prefix_index
        self._next_sync = [i * sync_s / n for i in range(n)]
        own = [c.tick_s for c in cores if c.tick_s]
        self._core_tick = min(own) if own else None
        self._next_core_tick = self._core_tick or math.inf
        self.tick_s = min(sync_s / n, self._core_tick or math.inf)
        self._turn = itertools.count()
        self._query: dict[int, int] = {}  # query id → its replica
        self._ids = itertools.count(1)
        self._to_global: list[dict[tuple[str, int], int]] = [{} for _ in cores]  # (kind, local id) → global id
        self._to_local: dict[tuple[str, int], tuple[int, int]] = {}
        self._routed: list[list[RouteEntry]] = [[] for _ in cores]  # since each replica's last sync
        self._reports: dict[str, Report] = {}
        self._stream: list[RouteEntry] = []
        self._read = [0] * n  # how far each replica read the stream
        self.syncs = 0
        self._now = 0.0

    # ------------------------------------------------------------------ the core's face to the simulator

    @property
    def keeps_prefix_index(self) -> bool:
        return self.cores[0].keeps_prefix_index

    @property
    def wants_prefill_done(self) -> bool:
        return self.cores[0].wants_prefill_done

    @property
    def decisions(self) -> int:
        return sum(c.decisions for c in self.cores)

    def dispatch_stats(self) -> Mapping[str, int]:
        out: dict[str, int] = {}
        for c in self.cores:
            for k, v in c.dispatch_stats().items():
                out[k] = out.get(k, 0) + v
        return out

    def instance_status(self) -> list[InstanceStatus]:
        merged: dict[str, InstanceStatus] = {}
        for c in self.cores:
            for s in c.instance_status():
                m = merged.get(s.name)
                merged[s.name] = s if m is None else replace(
                    m, queued=m.queued + s.queued, running=m.running + s.running,
                    dispatched=m.dispatched + s.dispatched, completed=m.completed + s.completed)
        return list(merged.values())

    def finished_calls(self) -> list[CallRecord]:
        calls = [replace(r, call_id=self._to_global[i].get(("call", r.call_id), r.call_id))
                 for i, c in enumerate(self.cores) for r in c.finished_calls()]
        return sorted(calls, key=lambda r: r.finished)

    # ------------------------------------------------------------------ events in

    def handle(self, ev: Event) -> list[Command]:
        self._now = ev.time
        route = self._ROUTES.get(type(ev))
        if route is None:
            raise TypeError(f"replicas in the simulator take no {type(ev).__name__}")
        return route(self, ev)

    def _by_call(self, ev: CallFinished | CallFailed | CallProgress | PrefillDone | Tokenized) -> list[Command]:
        i, local = self._to_local[("call", ev.call_id)]
        return self._out(i, self.cores[i].handle(replace(ev, call_id=local)))

    def _by_op(self, ev: OpFinished) -> list[Command]:
        i, local = self._to_local[("op", ev.op_id)]
        return self._out(i, self.cores[i].handle(replace(ev, op_id=local)))

    def _by_job(self, ev: JobFinished) -> list[Command]:
        i, local = self._to_local[("job", ev.job_id)]
        return self._out(i, self.cores[i].handle(replace(ev, job_id=local)))

    def _arrived(self, ev: QueryArrived) -> list[Command]:  # the next replica in turn
        i = self._query[ev.query.id] = next(self._turn) % len(self.cores)
        return self._out(i, self.cores[i].handle(ev))

    def _by_query(self, ev: QueryCancelled | QueryInput | QueryClosed | CallCancelled) -> list[Command]:
        i = self._query[ev.query_id]
        return self._out(i, self.cores[i].handle(ev))

    def _engines(self, ev: Event) -> list[Command]:
        out: list[Command] = []  # about the engines: every replica watches them
        for i, c in enumerate(self.cores):
            out += self._out(i, c.handle(ev))
        return out

    def _tick(self, ev: Tick) -> list[Command]:
        out: list[Command] = []
        t = ev.time
        if t >= self._next_core_tick:  # the policies' own clocks
            assert self._core_tick is not None
            self._next_core_tick = t + self._core_tick
            for i, c in enumerate(self.cores):
                out += self._out(i, c.handle(ev))
        for i in range(len(self.cores)):
            if t >= self._next_sync[i]:
                self._next_sync[i] += self.sync_s * max(1, math.floor((t - self._next_sync[i]) / self.sync_s) + 1)
                out += self._sync(i, t)
        return out

    def _sync(self, i: int, t: float) -> list[Command]:
        """Replica i publishes its report and routed prompts, then reads its peers'."""
        self.syncs += 1
        ex, core = self.exchanges[i], self.cores[i]
        self._reports[ex.replica] = ex.report(t, core.own_load(), core.tenant_costs())
        self._stream += self._routed[i]
        self._routed[i] = []
        events: list[Any] = ex.peers(t, {r: rep for r, rep in self._reports.items() if r != ex.replica})
        events += ex.routes(t, self._stream[self._read[i]:])
        self._read[i] = len(self._stream)
        out: list[Command] = []
        for e in events:
            out += self._out(i, core.handle(e))
        return out

    # ------------------------------------------------------------------ commands out

    def _global(self, i: int, kind: str, local: int) -> int:
        ids = self._to_global[i]
        g = ids.get((kind, local))
        if g is None:
            g = ids[(kind, local)] = next(self._ids)
            self._to_local[(kind, g)] = (i, local)
        return g

    def _out(self, i: int, cmds: list[Command]) -> list[Command]:
        """Commands of replica i with its ids made unique in the cluster (the others as they are)."""
        out: list[Command] = []
        for c in cmds:
            to_global = self._COMMANDS.get(type(c))
            if to_global is None:
                raise TypeError(f"replicas in the simulator: no handler for command {type(c).__name__}")
            out.append(to_global(self, i, c))
        return out

    def _same(self, i: int, c: Command) -> Command:
        return c

    def _send(self, i: int, c: SendCall) -> Command:
        if self._share_routes:
            entry = self.exchanges[i].route(c.instance, c.call.prompt, self._now)
            if entry is not None:
                self._routed[i].append(entry)
        return SendCall(replace(c.call, id=self._global(i, "call", c.call.id)), c.instance)

    def _cancel(self, i: int, c: CancelCall) -> Command:
        return CancelCall(self._global(i, "call", c.call_id), c.instance)

    def _tokenize(self, i: int, c: Tokenize) -> Command:
        return replace(c, call_id=self._global(i, "call", c.call_id))

    def _run_op(self, i: int, c: RunOp) -> Command:
        return RunOp(replace(c.op, id=self._global(i, "op", c.op.id)))

    def _run_batch(self, i: int, c: RunBatch) -> Command:
        return RunBatch(c.instance, tuple(replace(op, id=self._global(i, "op", op.id)) for op in c.ops))

    def _run_job(self, i: int, c: RunJob) -> Command:
        return replace(c, job_id=self._global(i, "job", c.job_id))

    # Events by what they are about: a call, op or job of one replica (its ids mapped back),
    # a query (its replica), the engines (every replica); a tick runs the syncs.
    _ROUTES: ClassVar[Mapping[type, Callable[[ReplicaCores, Any], list[Command]]]] = {
        **dict.fromkeys((CallFinished, CallFailed, CallProgress, PrefillDone, Tokenized), _by_call),
        OpFinished: _by_op,
        JobFinished: _by_job,
        QueryArrived: _arrived,
        **dict.fromkeys((QueryCancelled, QueryInput, QueryClosed, CallCancelled), _by_query),
        **dict.fromkeys((InstanceCapacity, PrefixEvicted, InstanceUp, InstanceDown, KVCacheEvents, KVViewChanged,
                         SlotsResident), _engines),
        Tick: _tick,
    }
    # Every command: those that carry a replica's own call, op or job ids get the cluster's;
    # the rest carry the cluster's query ids already.
    _COMMANDS: ClassVar[Mapping[type, Callable[[ReplicaCores, int, Any], Command]]] = {
        SendCall: _send, CancelCall: _cancel, Tokenize: _tokenize, RunOp: _run_op, RunBatch: _run_batch,
        RunJob: _run_job, QueryDone: _same, QueryFailed: _same, StepDone: _same, PolicyChanged: _same,
    }
