"""Discrete-event loop in virtual time: the simulator's driver of the scheduler core.

Sources of events: query arrivals (pulled lazily from the workload), engine wake-ups
(each simulated engine has at most one pending), tool-op completions and optional
periodic ticks. Commands from the core are executed at once in virtual time; after
every change an engine reports what it can start now (InstanceCapacity), which is how
the core learns that a slot freed.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from flowserve.core.records import CallRecord, InstanceStatus
from flowserve.graph.oracle import NO_ORACLE, Oracle
from flowserve.graph.primitives import op_units
from flowserve.profiles.ops import OpProfile
from flowserve.sim.engine import SimEngine
from flowserve.sim.sequence import Capacity
from flowserve.tokenize.prompts import SimTokenizer
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
from flowserve.types.events import Event, InstanceCapacity, JobFinished, OpFinished, QueryArrived, Tick, Tokenized
from flowserve.types.work import Query

ARRIVAL, ENGINE, OP, TICK = range(4)


@dataclass(frozen=True, slots=True)
class SimQuery:
    query: Query
    standalone_s: float  # latency alone on the fastest instance (the SLO's unit)
    oracle: Oracle = NO_ORACLE  # true output lengths and tool outcomes


@dataclass(frozen=True, slots=True)
class QueryOutcome:
    id: int
    workflow: str
    arrival: float
    finish: float
    latency: float
    standalone_s: float
    deadline: float | None
    met: bool | None
    failed: str | None = None


@dataclass(frozen=True, slots=True)
class InstanceOutcome:
    name: str
    gpu: str
    busy_s: float
    dispatched: int
    completed: int
    prefilled_tokens: int
    cached_tokens: int
    preemptions: int
    evicted_tokens: int


@dataclass
class SimResult:
    queries: list[QueryOutcome]
    calls: list[CallRecord]
    instances: list[InstanceOutcome]
    policy_changes: list[PolicyChanged]
    makespan: float
    sim_wall_s: float
    events: int
    decisions: int
    policy_stats: dict = field(default_factory=dict)  # the dispatch policy's own counters


class SimulatedCore(Protocol):
    """What the simulator drives: one `SchedulerCore`, or several replicas of it standing
    as one (`flowserve.sim.replicas.ReplicaCores`)."""

    @property
    def decisions(self) -> int: ...

    def handle(self, event: Event) -> list[Command]: ...
    def instance_status(self) -> list[InstanceStatus]: ...
    def finished_calls(self) -> list[CallRecord]: ...
    def dispatch_stats(self) -> Mapping[str, int]: ...


class Simulator:
    def __init__(
        self,
        core: SimulatedCore,
        engines: Iterable[SimEngine],
        queries: Iterable[SimQuery],
        tick_s: float | None = None,
        on_query_done: Callable[[QueryOutcome], None] | None = None,
        jobs: Mapping[str, Callable[..., Any]] | None = None,
        op_profiles: Mapping[str, OpProfile] | None = None,
    ) -> None:
        """jobs: the `RunJob` registry, job name → function (e.g. "alpha_sweep");
        op_profiles: cost profiles of the non-LLM engine instances, by name."""
        self.core = core
        self._op_profiles = dict(op_profiles or {})
        self._jobs = dict(jobs or {})
        self._tokenizer = SimTokenizer()
        self.engines = {e.name: e for e in engines}
        self._queries: Iterator[SimQuery] = iter(queries)
        self._tick_s = tick_s
        self._on_done = on_query_done
        self._heap: list[tuple[float, int, int, object]] = []
        self._seq = itertools.count()
        self._sim_queries: dict[int, SimQuery] = {}
        self._reported: dict[str, Capacity] = {}
        self._open = 0  # queries arrived and not yet ended
        self._arrivals_left = True
        self.outcomes: list[QueryOutcome] = []
        self.policy_changes: list[PolicyChanged] = []
        self.events = 0
        self.now = 0.0

    def _push(self, t: float, kind: int, payload: object) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), kind, payload))

    def _next_arrival(self) -> None:
        sq = next(self._queries, None)
        if sq is not None:
            if sq.query.arrival < self.now:  # pulled lazily: an earlier one would run in the past
                raise ValueError(f"query {sq.query.id} arrives at {sq.query.arrival:g} s, before the query "
                                 f"taken before it ({self.now:g} s): a workload's queries come in arrival order")
            self._push(sq.query.arrival, ARRIVAL, sq)
        self._arrivals_left = sq is not None

    def _schedule(self, eng: SimEngine) -> None:
        wake = eng.wake
        if wake is not None:
            self._push(wake, ENGINE, (eng, eng.version))

    def run(self) -> SimResult:
        # The loop allocates millions of short-lived, acyclic objects; the cyclic
        # collector's passes over the long-lived workload cost ~30% of the run and find
        # next to nothing (the radix trees' parent links become garbage only when the
        # engines are dropped, after the run). Collection resumes when the run ends.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run()
        finally:
            if enabled:
                gc.enable()

    def _run(self) -> SimResult:
        wall = time.perf_counter()
        self._next_arrival()
        if self._tick_s:
            self._push(self._tick_s, TICK, None)
        heap = self._heap
        while heap:
            t, _, kind, payload = heapq.heappop(heap)
            self.now = t
            if kind == ENGINE:
                eng, version = payload  # type: ignore[misc]
                if version != eng.version:
                    continue  # superseded wake-up
                self._feed(eng.advance(t), t, touched=(eng,))
            elif kind == ARRIVAL:
                sq: SimQuery = payload  # type: ignore[assignment]
                self._sim_queries[sq.query.id] = sq
                self._open += 1
                self._next_arrival()
                self._feed([QueryArrived(t, sq.query)], t)
            elif kind == OP:
                self._feed([payload], t)  # type: ignore[list-item]
            elif kind == TICK:
                self._feed([Tick(t)], t)
                if self._open or self._arrivals_left:
                    self._push(t + self._tick_s, TICK, None)  # type: ignore[operator]
        assert self._open == 0, f"{self._open} queries never ended"
        makespan = self.now
        core = self.core
        status = {s.name: s for s in core.instance_status()}
        return SimResult(
            queries=self.outcomes,
            calls=core.finished_calls(),
            instances=[
                InstanceOutcome(
                    e.name, status[e.name].spec.gpu, e.busy_time, status[e.name].dispatched,
                    status[e.name].completed, e.stats["prefilled"], e.stats["cached"],
                    e.stats["preemptions"], e.stats["evicted"])
                for e in self.engines.values()
            ],
            policy_changes=self.policy_changes,
            makespan=makespan,
            sim_wall_s=time.perf_counter() - wall,
            events=self.events,
            decisions=core.decisions,
            policy_stats=dict(core.dispatch_stats()),
        )

    def _feed(self, events: list[Event] | list, t: float,
              touched: tuple[SimEngine, ...] = ()) -> None:
        """Hand events to the core, execute its commands, and report capacity changes
        back until nothing changes any more at this instant."""
        pending: deque[Event] = deque(events)
        touched = dict.fromkeys(touched)  # insertion-ordered: deterministic
        handlers = self.COMMANDS
        while True:
            while pending:
                ev = pending.popleft()
                self.events += 1
                for cmd in self.core.handle(ev):
                    handler = handlers.get(type(cmd))
                    if handler is None:
                        raise TypeError(f"the simulator has no handler for command {cmd!r}")
                    handler(self, cmd, t, pending, touched)
            if not touched:
                return
            for eng in touched:
                self._schedule(eng)
                cap = eng.capacity()
                if self._reported.get(eng.name) != cap:
                    self._reported[eng.name] = cap
                    pending.append(InstanceCapacity(t, eng.name, cap.free_seqs,
                                                    cap.headroom_tokens, cap.kv_free_tokens))
            touched.clear()
            if not pending:
                return

    def _send(self, cmd: SendCall, t: float, pending: deque[Event], touched: dict[SimEngine, None]) -> None:
        call = cmd.call
        eng = self.engines[cmd.instance]
        oracle = self._sim_queries[call.query_id].oracle
        pending.extend(eng.submit(call, t, oracle.output_tokens(call.node), oracle.marks(call.node)))
        touched[eng] = None

    def _cancel(self, cmd: CancelCall, t: float, pending: deque[Event], touched: dict[SimEngine, None]) -> None:
        eng = self.engines[cmd.instance]
        eng.abort(cmd.call_id, t)
        touched[eng] = None

    def _run_op(self, cmd: RunOp, t: float, pending: deque[Event], touched: dict[SimEngine, None]) -> None:
        op = cmd.op
        outcome = self._sim_queries[op.query_id].oracle.tool(op.node)
        if outcome is None:  # a tool the oracle does not model: instant, no output
            pending.append(OpFinished(t, op.id))
        else:
            done = t + outcome.duration_s
            self._push(done, OP, OpFinished(done, op.id, outcome.error, outcome.value, outcome.output_tokens))

    def _tokenize(self, cmd: Tokenize, t: float, pending: deque[Event], touched: dict[SimEngine, None]) -> None:
        pending.append(Tokenized(t, cmd.call_id, self._tokenizer.encode(cmd.prompt, cmd.model)))

    def _step_done(self, cmd: StepDone, t: float, pending: deque[Event], touched: dict[SimEngine, None]) -> None:
        """A step of an open-ended query answered: no client waits on it here (the query's
        own outcome counts when it ends)."""

    def _policy_changed(self, cmd: PolicyChanged, t: float, pending: deque[Event],
                        touched: dict[SimEngine, None]) -> None:
        self.policy_changes.append(cmd)

    def _run_job(self, cmd: RunJob, t: float, pending: deque[Event], touched: dict[SimEngine, None]) -> None:
        # CPU work outside the served system: it takes no virtual time here
        fn = self._jobs.get(cmd.name)
        if fn is None:
            pending.append(JobFinished(t, cmd.job_id, error=f"no job {cmd.name!r} registered with the simulator"))
            return
        try:
            pending.append(JobFinished(t, cmd.job_id, fn(*cmd.args)))
        except Exception as e:  # a failed job is reported, never lost
            pending.append(JobFinished(t, cmd.job_id, error=f"{type(e).__name__}: {e}"))

    def _run_batch(self, cmd: RunBatch, t: float, pending: deque[Event], touched: dict[SimEngine, None]) -> None:
        """A non-LLM engine runs a batch: its profile says how long; the oracle what each op
        returns (and any extra delay or error, e.g. a slow or failing search service)."""
        done = t + self._op_profiles[cmd.instance].batch_time([(op.op, op_units(op.args)) for op in cmd.ops])
        for op in cmd.ops:
            outcome = self._sim_queries[op.query_id].oracle.tool(op.node)
            if outcome is None:
                self._push(done, OP, OpFinished(done, op.id))
            else:
                end = done + outcome.duration_s
                self._push(end, OP, OpFinished(end, op.id, outcome.error, outcome.value, outcome.output_tokens))

    def _query_done(self, cmd: QueryDone, t: float, pending: deque[Event], touched: dict[SimEngine, None]) -> None:
        self._end_query(cmd.query_id, cmd.time, cmd.deadline_met, None)

    def _query_failed(self, cmd: QueryFailed, t: float, pending: deque[Event],
                      touched: dict[SimEngine, None]) -> None:
        self._end_query(cmd.query_id, cmd.time, False, cmd.reason)

    def _end_query(self, query_id: int, time: float, met: bool | None, failed: str | None) -> None:
        sq = self._sim_queries.pop(query_id)
        q = sq.query
        self._open -= 1
        out = QueryOutcome(q.id, q.workflow, q.arrival, time, time - q.arrival, sq.standalone_s, q.deadline, met,
                           failed)
        self.outcomes.append(out)
        if self._on_done is not None:
            self._on_done(out)

    # The one command table: every command the core issues has its handler (a test checks).
    COMMANDS: ClassVar[Mapping[type, Callable[..., None]]] = {
        SendCall: _send, CancelCall: _cancel, RunOp: _run_op, RunBatch: _run_batch, Tokenize: _tokenize,
        QueryDone: _query_done, QueryFailed: _query_failed, StepDone: _step_done, PolicyChanged: _policy_changed,
        RunJob: _run_job,
    }
