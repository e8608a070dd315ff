"""Record a replayable trace of the queries the scheduler core serves, from its events.

The recorder watches the events the core handles (through a dispatch policy's
`observe`) and reads the rest from the view: after an event that can move a query
(its arrival, one of its calls finishing or failing, a tool op finishing) it diffs the
query's graph. Nodes issued by one event form one parallel step of the recorded plan
(exact for step-by-step programs; a general DAG is serialised at issue points); calls
keep their prompt's sharing structure as segments, ops their measured duration.

A query still running when a trace is cut is completed from what the scheduler
expects: its issued calls with the predicted output length, then its expected remaining
calls (`expected_remaining`), one step per stage (parallel when that stage has run in
parallel before), so a window's trace carries its whole load even under overload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowserve.core.state import QueryState
from flowserve.core.view import ClusterView
from flowserve.graph.nodes import LLMNode
from flowserve.graph.plan import CallStep, OpStep, QueryPlan, Segment, Step
from flowserve.tune.segments import BlockIds, prompt_segments
from flowserve.types.events import CallFailed, CallFinished, Event, InstanceDown, OpFinished, QueryArrived
from flowserve.workloads.base import QuerySpec, Workload
from flowserve.workloads.trace import expectations_for


@dataclass
class _Item:
    key: str
    stage: str
    started: float
    prompt: tuple[Segment, ...] = ()  # LLM calls
    max_tokens: int = 0
    op: str | None = None  # tool ops
    finished: float | None = None
    output: int | None = None
    error: bool = False

    def finish(self, now: float, output: int, error: bool) -> None:
        self.finished, self.output, self.error = now, output, error


@dataclass
class _Record:
    qs: QueryState
    arrival: float
    deadline_s: float | None
    attrs: Mapping[str, Any]
    steps: list[list[_Item]] = field(default_factory=list)
    items: dict[str, _Item] = field(default_factory=dict)
    open: set[str] = field(default_factory=set)
    calls: list[int] = field(default_factory=list)
    ended: float | None = None
    failed: bool = False

    def end(self, now: float, failed: bool) -> None:
        self.ended, self.failed = now, failed


@dataclass(frozen=True)
class ReplayTrace:
    """Queries that arrived in a window, arrivals shifted to start at 0."""

    workload: Workload
    deadlines: tuple[float | None, ...]  # seconds after arrival
    start: float
    end: float
    unfinished: int  # queries completed from expectations


class TraceRecorder:
    def __init__(self) -> None:
        self._records: dict[int, _Record] = {}  # arrival order
        self._call_owner: dict[int, int] = {}
        self._with_ops: set[int] = set()
        self._blocks = BlockIds()
        self._stage_prefix: dict[tuple[str, str], Segment] = {}
        self._first_seen: dict[tuple[str, str], Segment] = {}
        self._parallel: set[tuple[str, str]] = set()
        self._op_time: dict[str, tuple[float, int]] = {}

    def __len__(self) -> int:
        return len(self._records)

    def observe(self, event: Event, view: ClusterView) -> list[tuple[float, float]]:
        """Update from one handled event; returns (finish time, latency) of the queries
        that completed with it."""
        now = event.time
        if isinstance(event, QueryArrived):
            qs = view.queries.get(event.query.id)
            if qs is None:  # failed at once (no instance for it): nothing to replay
                return []
            q = qs.query
            rec = _Record(qs, q.arrival, None if q.deadline is None else q.deadline - q.arrival,
                          dict(qs.run.workflow.attrs))
            self._records[q.id] = rec
            touched = [rec]
        elif isinstance(event, CallFinished | CallFailed):
            qid = self._call_owner.get(event.call_id)
            touched = [self._records[qid]] if qid in self._records else []
        elif isinstance(event, OpFinished):
            touched = [self._records[q] for q in self._with_ops]
        elif isinstance(event, InstanceDown):
            touched = [r for r in self._records.values() if r.ended is None]
        else:
            return []
        return [(now, now - rec.arrival) for rec in touched if self._sync(rec, view, now) and not rec.failed]

    def _sync(self, rec: _Record, view: ClusterView, now: float) -> bool:
        """Catch up with the query's graph; True when the query ended with this event."""
        if rec.ended is not None:
            return False
        qs, run = rec.qs, rec.qs.run
        if len(run.issued) > len(rec.items):
            step = []
            for key, node in run.nodes.items():
                if key in run.issued and key not in rec.items:
                    if isinstance(node, LLMNode):
                        segs = prompt_segments(node.prompt, self._blocks)
                        item = _Item(key, node.stage, now, segs, node.max_tokens)
                        self._note_prefix((qs.query.workflow, node.stage), segs[0])
                    else:
                        item = _Item(key, node.stage, now, op=node.op)
                    rec.items[key] = item
                    rec.open.add(key)
                    step.append(item)
            rec.steps.append(step)
            stages = [it.stage for it in step if it.op is None]
            self._parallel.update((qs.query.workflow, s) for s in stages if stages.count(s) > 1)
            for cs in qs.inflight.values():
                if cs.id not in self._call_owner:
                    self._call_owner[cs.id] = qs.id
                    rec.calls.append(cs.id)
        for key in [k for k in rec.open if k in run.results]:
            res = run.results[key]
            item = rec.items[key]
            item.finish(now, res.output_tokens, res.error is not None)
            rec.open.discard(key)
            if item.op is not None:
                total, n = self._op_time.get(item.op, (0.0, 0))
                self._op_time[item.op] = (total + now - item.started, n + 1)
        if any(rec.items[k].op is not None for k in rec.open):
            self._with_ops.add(qs.id)
        else:
            self._with_ops.discard(qs.id)
        if qs.id not in view.queries:  # QueryDone or QueryFailed with this event
            rec.end(now, qs.failed)
            self._with_ops.discard(qs.id)
            for cid in rec.calls:
                self._call_owner.pop(cid, None)
            return True
        return False

    def _note_prefix(self, stage: tuple[str, str], first: Segment) -> None:
        """A stage's first segment is its shared prefix once two of its prompts begin with it."""
        last = self._first_seen.get(stage)
        if last is not None and last.id == first.id:
            keep = self._stage_prefix.get(stage)
            if keep is None or keep.id != first.id or keep.length < first.length:
                self._stage_prefix[stage] = first
        self._first_seen[stage] = first

    def forget(self, before: float) -> None:
        """Drop the records of ended queries that arrived before `before`."""
        for qid in [q for q, r in self._records.items() if r.arrival < before and r.ended is not None]:
            del self._records[qid]

    # ------------------------------------------------------------------ replay

    def replay_trace(self, start: float, end: float, view: ClusterView) -> ReplayTrace | None:
        """The queries that arrived in [start, end) and did not fail, as a workload."""
        specs, deadlines, unfinished = [], [], 0
        priors: dict[tuple[str, str], float] = {}
        for qid, rec in self._records.items():
            if not start <= rec.arrival < end or rec.failed:
                continue
            workflow = rec.qs.query.workflow
            steps: list[Step] = [tuple(self._step_item(it, workflow, view, end) for it in step)
                                 for step in rec.steps]
            if rec.ended is None:
                unfinished += 1
                steps += self._tail(rec, view)
            steps = [s for s in steps if s]
            if not steps:
                continue
            for step in steps:
                for it in step:
                    if isinstance(it, CallStep):
                        priors[(workflow, it.stage)] = float(view.predictor.predict(workflow, it.stage))
            q = rec.qs.query
            specs.append(QuerySpec(qid, rec.arrival - start, QueryPlan(workflow, tuple(steps), rec.attrs),
                                   q.tenant, q.priority))
            deadlines.append(rec.deadline_s)
        if not specs:
            return None
        wl = Workload(f"window[{start:.0f},{end:.0f})", tuple(specs), expectations_for(specs), priors)
        return ReplayTrace(wl, tuple(deadlines), start, end, unfinished)

    def _step_item(self, it: _Item, workflow: str, view: ClusterView, now: float) -> CallStep | OpStep:
        if it.op is not None:
            if it.finished is not None:
                duration = it.finished - it.started
            else:
                total, n = self._op_time.get(it.op, (0.0, 0))
                duration = max(now - it.started, total / n if n else 0.0)
            return OpStep(it.stage, it.op, duration, it.error)
        out = it.output
        if out is None:
            out = min(view.predictor.predict(workflow, it.stage), max(it.max_tokens, 1))
        return CallStep(it.stage, it.prompt, max(out, 1))

    def _tail(self, rec: _Record, view: ClusterView) -> list[Step]:
        workflow = rec.qs.query.workflow
        steps: list[Step] = []
        for est in rec.qs.expected_remaining():
            n = int(est.count + 0.5)
            if n <= 0:
                continue
            out = est.output_tokens or view.predictor.predict(workflow, est.stage)
            calls = [CallStep(est.stage, self._tail_prompt(workflow, est.stage, max(est.input_tokens, 2)),
                              max(out, 1)) for _ in range(n)]
            if (workflow, est.stage) in self._parallel:
                steps.append(tuple(calls))
            else:
                steps.extend((c,) for c in calls)
        return steps

    def _tail_prompt(self, workflow: str, stage: str, length: int) -> tuple[Segment, ...]:
        """The stage's shared prefix as last seen (schema, instructions), then unique tokens."""
        prefix = self._stage_prefix.get((workflow, stage))
        if prefix is None:
            return (Segment(self._blocks.unique(), length),)
        shared = min(prefix.length, length - 1)
        return (Segment(prefix.id, shared), Segment(self._blocks.unique(), length - shared))
