"""Recorded programs and workflow queries in the agent-trace format, with their shape.

The agent-trace format (`flowserve.workloads.agent_trace`) is one mapping per query that
holds one list of calls `{"step", "input_length", "output_length"}`. What the gateway
records (`gateway.record`, `flowserve serve --record`) is that format, one query per
JSON line, each call with the optional fields that keep its shape:

* `thread` — the program's thread the call ran on (`x-flowserve-thread`);
* `after` — the indices of the earlier calls it followed: the latest call that had
  finished when it was sent, and its own thread's previous call;
* `gap_s` — seconds between the last of those finishing (the query's arrival, for a
  first call) and this call being sent: the client's tool time, replayed as a timed op;
* `prompt` — the prompt as segments `[[id, length], ...]` (prefix-chained block hashes
  of its tokens), so a replay shares prefixes — a program's growing context — as the
  recorded prompts did.

and, per query, `arrival` (seconds since the recording started), `workflow`,
`deadline_s` and `latency_s`. A call without `after` follows the one before it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flowserve.graph.plan import CallStep, DagNode, DagPlan, OpStep, Segment
from flowserve.limits import MAX_OP_SECONDS, MAX_SEED, WHY_OP, WHY_PROMPT
from flowserve.workloads.base import SegmentIds

GAP_OP = "client"  # the op a replayed tool gap runs: the client's own time between calls
GAP_STAGE = "client"


@dataclass(frozen=True, slots=True)
class TracedCall:
    step: str
    input_length: int
    output_length: int
    thread: str | None = None
    after: tuple[int, ...] | None = None  # None: the previous call
    gap_s: float = 0.0
    prompt: tuple[Segment, ...] | None = None


@dataclass(frozen=True, slots=True)
class TracedQuery:
    calls: tuple[TracedCall, ...]
    arrival: float | None = None
    workflow: str | None = None
    deadline_s: float | None = None

    @property
    def shaped(self) -> bool:
        """Whether it records more than the calls' order (threads, gaps, prompts)."""
        return any(c.after is not None or c.gap_s or c.prompt is not None or c.thread for c in self.calls)


def _int(v: Any, field: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{field} must be a non-negative integer, got {v!r}")
    return v


def _seconds(v: Any, field: str, limit: float = MAX_OP_SECONDS) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or not 0 <= v <= limit:
        raise ValueError(f"{field} must be seconds in 0..{limit:,.0f}, got {v!r}")
    return float(v)


def _prompt(v: Any, length: int) -> tuple[Segment, ...]:
    if not isinstance(v, list) or not v:
        raise ValueError("prompt must be a non-empty list of [id, length] segments")
    segs = []
    for item in v:
        if not (isinstance(item, list) and len(item) == 2):
            raise ValueError(f"prompt segment {item!r} is not [id, length]")
        i, n = _int(item[0], "a segment id"), _int(item[1], "a segment length")
        if i >= MAX_SEED or not 1 <= n <= 1 << 18:
            raise ValueError(f"prompt segment [{i}, {n}] is out of range ({WHY_PROMPT})")
        segs.append(Segment(i, n))
    if sum(s.length for s in segs) != length:
        raise ValueError(f"prompt segments sum to {sum(s.length for s in segs)} tokens, not input_length {length}")
    return tuple(segs)


def parse_call(c: Any, index: int) -> TracedCall:
    if not isinstance(c, dict):
        raise ValueError(f"call {index} must be a mapping")
    for field in ("step", "input_length", "output_length"):
        if field not in c:
            raise ValueError(f"call {index} has no {field!r}")
    n_in = _int(c["input_length"], "input_length")
    thread = c.get("thread")
    if thread is not None and not isinstance(thread, str):
        raise ValueError(f"call {index}: thread must be a string")
    after = c.get("after")
    if after is not None:
        if not isinstance(after, list):
            raise ValueError(f"call {index}: after must be a list of earlier call indices")
        after = tuple(_int(a, "after") for a in after)
        if any(a >= index for a in after):
            raise ValueError(f"call {index}: after names a call that is not earlier: {list(after)}")
    gap = _seconds(c.get("gap_s", 0.0), f"call {index}: gap_s ({WHY_OP})")
    prompt = _prompt(c["prompt"], n_in) if c.get("prompt") is not None else None
    return TracedCall(str(c["step"]), n_in, _int(c["output_length"], "output_length"), thread, after, gap, prompt)


def parse_query(item: Any, where: str) -> TracedQuery:
    """One query of an agent trace (`where`: "query 3", "line 4"); ValueError on bad input."""
    lists = [v for v in item.values() if isinstance(v, list)] if isinstance(item, dict) else []
    if len(lists) != 1:
        raise ValueError(f"{where} must be a mapping holding one list of calls")
    try:
        calls = tuple(parse_call(c, i) for i, c in enumerate(lists[0]))
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    if not calls:
        raise ValueError(f"{where} has no calls")
    arrival, deadline, workflow = item.get("arrival"), item.get("deadline_s"), item.get("workflow")
    return TracedQuery(calls, None if arrival is None else _seconds(arrival, f"{where}: arrival", 1e12),
                       None if workflow is None else str(workflow),
                       None if deadline is None else _seconds(deadline, f"{where}: deadline_s", 1e12))


def query_json(q: TracedQuery, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A traced query as one line of the format (`extra`: its id, program, tenant, ...)."""
    calls = []
    for c in q.calls:
        d: dict[str, Any] = {"step": c.step, "input_length": c.input_length, "output_length": c.output_length}
        if c.thread is not None:
            d["thread"] = c.thread
        if c.after is not None:
            d["after"] = list(c.after)
        if c.gap_s:
            d["gap_s"] = round(c.gap_s, 6)
        if c.prompt is not None:
            d["prompt"] = [[s.id, s.length] for s in c.prompt]
        calls.append(d)
    out: dict[str, Any] = dict(extra or {})
    for key, value in (("arrival", q.arrival), ("workflow", q.workflow), ("deadline_s", q.deadline_s)):
        if value is not None:
            out[key] = value
    out["calls"] = calls
    return out


def shaped_plan(q: TracedQuery, workflow: str, shared: Mapping[str, int], ids: SegmentIds) -> DagPlan:
    """The query as a graph: each call after the calls it followed, its tool gap a timed
    op between them; recorded prompts as recorded, others a shared stage prefix
    (`shared[stage]` tokens) and a unique rest."""
    nodes: list[DagNode] = []
    for i, c in enumerate(q.calls):
        deps: Sequence[str] = [f"c{j}" for j in c.after] if c.after is not None else ([f"c{i - 1}"] if i else [])
        if c.gap_s > 0:
            nodes.append(DagNode(f"g{i}", OpStep(GAP_STAGE, GAP_OP, c.gap_s), tuple(deps)))
            deps = [f"g{i}"]
        nodes.append(DagNode(f"c{i}", CallStep(c.step, c.prompt or _modelled(c, workflow, shared, ids),
                                               max(c.output_length, 1)), tuple(deps)))
    return DagPlan(workflow, tuple(nodes))


def _modelled(c: TracedCall, workflow: str, shared: Mapping[str, int], ids: SegmentIds) -> tuple[Segment, ...]:
    n_in = max(c.input_length, 1)
    head = min(shared.get(c.step, 0), n_in - 1)
    unique = Segment(ids.unique(), n_in - head)
    return (Segment(ids.shared(f"{workflow}/{c.step}"), head), unique) if head > 0 else (unique,)


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """A finished call as a recording sees it (times on the recording's clock)."""

    step: str
    thread: str | None
    ready: float  # when it was sent (its node became ready)
    finished: float
    input_length: int
    output_length: int
    prompt: tuple[Segment, ...] | None = None


def traced_calls(calls: Sequence[RecordedCall], arrival: float) -> tuple[TracedCall, ...]:
    """What each call followed, from the times alone: the latest call that had finished
    when it was sent, and its own thread's previous finished call; its gap is the time
    from the later of those (the query's arrival for a first call) to its sending."""
    ordered = sorted(calls, key=lambda c: (c.ready, c.finished))
    out = []
    for i, c in enumerate(ordered):
        done = [j for j in range(i) if ordered[j].finished <= c.ready + 1e-9]
        after = set()
        if done:
            after.add(max(done, key=lambda j: ordered[j].finished))
            own = [j for j in done if ordered[j].thread == c.thread]
            if own:
                after.add(max(own, key=lambda j: ordered[j].finished))
        start = max((ordered[j].finished for j in after), default=arrival)
        out.append(TracedCall(c.step, c.input_length, c.output_length, c.thread, tuple(sorted(after)),
                              max(c.ready - start, 0.0), c.prompt))
    return tuple(out)
