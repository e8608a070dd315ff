"""`flowserve bench explain`: two dispatch policies on the same arrivals — where their
decisions differ, and what each difference cost.

Both run on the same workload (one of `bench compare`'s, on its cluster, at one SLO scale).
A `DecisionLog` around each dispatch policy records every decision: the call (its query
and workflow node, so the two runs' calls match), what the router believed each candidate
caches of its prompt (for a policy without the router's prefix index: where the log saw
it route prompts), and the candidates' load. Each decision is then of one kind:

* `cold`: no candidate caches a useful part of the prompt (less than `MIN_HIT` tokens);
* `followed`: it went to an instance caching within one block of the best hit;
* `left`: it left the cached prefix for load — some candidate cached at least a block more.

A `left` call was *re-prefilled* when its engine computed more of the prompt than the best
holder was believed to cache; what that cost is the prefill of those tokens on its
instance (`extra_prefill_s`, the instance's cost model). Matched calls the two policies
placed differently are grouped by their kinds in each run, with the sums of B − A of the
calls' queueing, prefill and end-to-end seconds: which trade each side made, and at what
price. Virtual time: the figures do not depend on the machine's load.
"""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.config import load_cluster
from flowserve.core.policy import DispatchPolicy, DriverServices
from flowserve.core.records import CallRecord
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.metrics.summary import attainment
from flowserve.policies import make_dispatch
from flowserve.profiles.instance import instance_profile
from flowserve.sim.run import PolicySpec, simulate, standalone_times
from flowserve.sim.simulator import SimResult
from flowserve.tune.alpha import JOBS
from flowserve.types.commands import Command
from flowserve.types.events import Event
from flowserve.workloads.mixes import Case

MIN_HIT = 64  # tokens: a believed hit below this is no reason to go anywhere
BLOCK = 16  # tokens: hits closer than a block count as equal
Key = tuple[int, str, int]  # (query, workflow node, attempt): the same call in both runs


@dataclass(frozen=True, slots=True)
class Seen:
    """One dispatch decision as the log saw it."""

    call_id: int
    key: Key
    time: float
    input_tokens: int
    chosen: str
    hits: Mapping[str, int]  # believed cached prompt tokens per candidate
    queued: Mapping[str, int]  # calls waiting per candidate

    @property
    def best_hit(self) -> int:
        return max(self.hits.values())

    @property
    def kind(self) -> str:
        best, mine = self.best_hit, self.hits[self.chosen]
        if best < MIN_HIT:
            return "cold"
        return "followed" if mine >= best - BLOCK else "left"


class DecisionLog(DispatchPolicy):
    """A dispatch policy that records every decision of the policy it wraps (which it
    otherwise is: its declarations, hooks and counters)."""

    def __init__(self, inner: DispatchPolicy, seen: list[Seen] | None = None) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]
        self.uses_deadline = inner.uses_deadline  # type: ignore[misc]
        # the core's index only where the policy reads it (it changes the core's estimates); without it the
        # log remembers where it routed prompts (`shadow`), as a router without an index would believe
        self.needs_prefix_index = inner.needs_prefix_index  # type: ignore[misc]
        self.shadow = None if inner.needs_prefix_index else PrefixIndex(window_s=0.0)
        self.prefix_window_s = inner.prefix_window_s
        self.binding = inner.binding
        self.tick_s = inner.tick_s
        self.shares_prefills = inner.shares_prefills  # type: ignore[misc]
        self.seen: list[Seen] = [] if seen is None else seen

    def __deepcopy__(self, memo: dict) -> DecisionLog:
        # the copies a run makes share one record of decisions
        return DecisionLog(copy.deepcopy(self.inner, memo), self.seen)

    def _hits(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> dict[str, int]:
        if self.shadow is None or cs.call is None:
            return {i.name: view.cached_tokens(cs, i) for i in candidates}
        per = self.shadow.match_by_instance(cs.call.prompt)[1]
        return {i.name: min(per.get(i.name, 0), cs.input_tokens - 1) for i in candidates}

    @property
    def stats(self) -> Mapping[str, int]:  # type: ignore[override]
        return self.inner.stats

    def attach(self, services: DriverServices) -> None:
        self.inner.attach(services)

    def observe(self, event: Event, view: ClusterView) -> Sequence[Command]:
        return self.inner.observe(event, view)

    def choose(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> InstanceState:
        chosen = self.inner.choose(cs, candidates, view)
        self.seen.append(Seen(cs.id, (cs.query.id, cs.node.key, cs.attempts), view.now, cs.input_tokens, chosen.name,
                              self._hits(cs, candidates, view), {i.name: len(i.queue) for i in candidates}))
        if self.shadow is not None and cs.call is not None:
            self.shadow.add(cs.call.prompt, chosen.name, view.now, count=False)
        return chosen


@dataclass(frozen=True)
class Run:
    label: str
    result: SimResult
    seen: list[Seen]

    def calls(self) -> dict[Key, tuple[Seen, CallRecord]]:
        """Each call's last decision and its record, by key."""
        records = {c.call_id: c for c in self.result.calls}
        out = {}
        for s in self.seen:
            rec = records.get(s.call_id)
            if rec is not None:
                out[s.key] = (s, rec)
        return out


def run_logged(case: Case, queries: int, seed: int, scale: float, policy: PolicySpec, label: str) -> Run:
    specs = load_cluster(case.cluster)
    wl = case.build(queries, seed)
    log = DecisionLog(make_dispatch(policy.dispatch, policy.dispatch_params))
    res = simulate(specs, wl, policy, scale, standalone_times(wl, specs), jobs=JOBS, dispatch=log)
    return Run(label, res, log.seen)


def extra_prefill_s(run: Run, costs: Mapping[str, Any]) -> tuple[int, int, float]:
    """Of the calls that left the cached prefix: how many, how many were re-prefilled (their
    engine computed more of the prompt than the best holder was believed to cache), and the
    prefill seconds of those tokens on their instances."""
    left = redone = 0
    seconds = 0.0
    for s, rec in run.calls().values():
        if s.kind != "left":
            continue
        left += 1
        best = min(s.best_hit, rec.input_tokens - 1)
        if rec.cached_tokens < best:
            redone += 1
            cost, n = costs[rec.instance], rec.input_tokens
            seconds += cost.prefill_time(n - rec.cached_tokens, rec.cached_tokens) - cost.prefill_time(n - best, best)
    return left, redone, seconds


def _times(rec: CallRecord) -> tuple[float, float, float]:
    """A call's queueing (ready → started), prefill (started → first token) and end-to-end seconds."""
    started = rec.started if rec.started is not None else rec.released
    first = rec.first_token if rec.first_token is not None else rec.finished
    return started - rec.ready, first - started, rec.finished - rec.ready


def run_summary(run: Run, scale: float) -> dict[str, Any]:
    res = run.result
    lat = [q.latency for q in res.queries if q.failed is None]
    ttft = [c.first_token - c.ready for c in res.calls if c.first_token is not None]
    kinds = Counter(seen.kind for seen, _ in run.calls().values())
    prompt = sum(c.input_tokens for c in res.calls) or 1
    return {"attainment": attainment(res, scale, False), "latency_mean_s": float(np.mean(lat)) if lat else None,
            "ttft_p90_s": float(np.percentile(ttft, 90)) if ttft else None,
            "token_hit_rate": sum(c.cached_tokens for c in res.calls) / prompt, "makespan_s": res.makespan,
            "decisions": dict(kinds), "policy_stats": dict(res.policy_stats)}


def divergences(a: Run, b: Run) -> list[dict[str, Any]]:
    """Matched calls placed differently, grouped by (A's kind, B's kind): count and Σ (B − A) seconds."""
    ca, cb = a.calls(), b.calls()
    groups: dict[tuple[str, str], list[tuple[float, float, float]]] = defaultdict(list)
    for key in ca.keys() & cb.keys():
        (sa, ra), (sb, rb) = ca[key], cb[key]
        if sa.chosen == sb.chosen and sa.kind == sb.kind:
            continue
        ta, tb = _times(ra), _times(rb)
        groups[(sa.kind, sb.kind)].append((tb[0] - ta[0], tb[1] - ta[1], tb[2] - ta[2]))
    rows = [{"a": ka, "b": kb, "calls": len(d), "queueing_s": sum(x[0] for x in d), "prefill_s": sum(x[1] for x in d),
             "end_to_end_s": sum(x[2] for x in d)} for (ka, kb), d in groups.items()]
    return sorted(rows, key=lambda r: -abs(r["end_to_end_s"]))


def explain(case: Case, queries: int, seed: int, scale: float, a: PolicySpec, b: PolicySpec,
            labels: tuple[str, str]) -> dict[str, Any]:
    """Both policies on the case's workload at `scale`; the report (module docstring)."""
    runs = [run_logged(case, queries, seed, scale, p, label) for p, label in zip((a, b), labels, strict=True)]
    costs = {s.name: instance_profile(s).cost for s in load_cluster(case.cluster) if s.kind == "llm"}
    out: dict[str, Any] = {"workload": case.name, "cluster": case.cluster, "queries": queries, "seed": seed,
                           "scale": scale, "policies": {}}
    for run in runs:
        left, redone, seconds = extra_prefill_s(run, costs)
        out["policies"][run.label] = {**run_summary(run, scale), "left_prefix": left, "re_prefilled": redone,
                                      "extra_prefill_s": seconds}
    matched = runs[0].calls().keys() & runs[1].calls().keys()
    out["matched_calls"] = len(matched)
    out["divergences"] = divergences(*runs)
    out["findings"] = findings(out, labels)
    return out


def findings(report: Mapping[str, Any], labels: tuple[str, str]) -> list[str]:
    """The report in sentences."""
    lines = []
    pa, pb = (report["policies"][label] for label in labels)
    for label, p, other in ((labels[0], pa, pb), (labels[1], pb, pa)):
        lines.append(f"{label} left the cached prefix for load on {p['left_prefix']} calls "
                     f"({labels[1] if label == labels[0] else labels[0]}: {other['left_prefix']}); "
                     f"{p['re_prefilled']} of them were re-prefilled later, +{p['extra_prefill_s']:.1f} s of prefill")
    for row in report["divergences"][:4]:
        lines.append(f"{row['calls']} calls {labels[0]} placed '{row['a']}' and {labels[1]} '{row['b']}': "
                     f"{labels[1]} − {labels[0]}: queueing {row['queueing_s']:+.1f} s, prefill "
                     f"{row['prefill_s']:+.1f} s, end to end {row['end_to_end_s']:+.1f} s")
    return lines
