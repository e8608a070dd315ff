"""`flowserve_slo`: a dispatch policy that keeps calls with TTFT/TPOT objectives (`LatencySLO`,
the `x-slo-ttft-ms` / `x-slo-tpot-ms` headers) on instances predicted to meet them, and
sheds the sheddable ones no instance would serve in time.

For a call with objectives, the latency predictor (`flowserve.policies.slo.predictor`)
predicts its TTFT and TPOT on every candidate, and the headroom formula
(`flowserve.policies.slo.headroom`) gives each candidate its load r (the larger share of
an objective used) and score h = 1 / (1 + r):

* candidates with r ≤ `margin` are *feasible*; the base policy (`base`, the `flowserve`
  dispatch by default) chooses among them with everything else it weighs — prefix reuse,
  load, deadlines (taking the feasible candidate of least headroom instead, llm-d's "least"
  strategy, missed more objectives in `bench slo`: the predictions, made at dispatch, do not
  see the batch grow after it);
* with none feasible the call goes to the largest h (the least violation), unless it is
  sheddable (`Query.sheddable`) and `shed` is on: then the core refuses it (429 live);
* a call without objectives goes wherever the base policy sends it.

Every call's features on its instance are kept and learned from when it finishes, so the
predictor also learns from calls without objectives. Parameters: `base`, `model` (the
latency model: `analytic`, or a learned one of `flowserve.predict`), `warmup` (calls a
hardware profile's model learns before it predicts), `margin`, `shed`, `seed`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from flowserve.core.params import Help
from flowserve.core.policy import DispatchPolicy, DriverServices
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.policies.least_load import LeastLoad
from flowserve.policies.round_robin import RoundRobin
from flowserve.policies.scoring.dispatch import ScoredDispatch
from flowserve.policies.scoring.profile import shipped_profile
from flowserve.policies.slo.headroom import admits, headroom_score, slo_load
from flowserve.policies.slo.predictor import Latency, LatencyPredictor
from flowserve.types.commands import Command
from flowserve.types.events import Event
from flowserve.types.work import LatencySLO

DEFAULT_MODEL = "river"  # `flowserve bench predictor` (docs/policies.md)
BASES: dict[str, type[DispatchPolicy]] = {c.name: c for c in (LeastLoad, RoundRobin)}  # and the shipped profiles


def base_policy(name: str) -> DispatchPolicy:
    """The base policy `name` names: a policy class of `BASES`, or a shipped scoring profile."""
    return BASES[name]() if name in BASES else ScoredDispatch(shipped_profile(name))


def loads_of(predictions: Sequence[Latency | None], slo: LatencySLO) -> list[float]:
    """Each candidate's SLO load (inf where nothing could be predicted)."""
    return [math.inf if p is None else slo_load(p[0], p[1], slo) for p in predictions]


class SLOAwareDispatch(DispatchPolicy):
    """See the module docstring."""

    name = "flowserve_slo"

    def __init__(self,
                 base: Annotated[Literal["flowserve", "least_load", "llmd", "round_robin"],
                                 Help("the policy that chooses among the candidates predicted to meet the "
                                      "objectives, and places calls without objectives")] = "flowserve",
                 model: Annotated[str, Help("the latency model: `analytic`, a learned one of `flowserve.predict` "
                                            "(`river`, `sgd`, `lightgbm`, `hgb_p90`) or an import path")
                                  ] = DEFAULT_MODEL,
                 warmup: Annotated[int, Help("calls a hardware profile's model learns from before it predicts "
                                             "(the analytic model predicts until then)")] = 32,
                 margin: Annotated[float, Help("the largest SLO load r (the larger share of an objective "
                                               "predicted used) still feasible; > 0")] = 1.0,
                 shed: Annotated[bool, Help("refuse a sheddable call no candidate is predicted to serve in "
                                            "time (429 live)")] = True,
                 seed: Annotated[int, Help("the learned models' seed")] = 0) -> None:
        if not margin > 0:
            raise ValueError(f"margin must be > 0, got {margin}")
        self.base = base_policy(base)
        self.predictor = LatencyPredictor(model, seed, warmup)
        self.margin = margin
        self.shedding = shed
        # the base policy's declarations are the policy's
        self.uses_deadline = self.base.uses_deadline  # type: ignore[misc]
        self.needs_prefix_index = self.base.needs_prefix_index  # type: ignore[misc]
        self.prefix_window_s = self.base.prefix_window_s
        self.binding = self.base.binding
        self.tick_s = self.base.tick_s
        self.shares_prefills = self.base.shares_prefills  # type: ignore[misc]
        self._memo: tuple[Any, list[float]] | None = None
        self.counts = {"slo_calls": 0, "predicted_met": 0, "predicted_missed": 0, "shed": 0}

    @property
    def stats(self) -> dict[str, int]:  # type: ignore[override]
        return {**self.base.stats, **self.counts}

    def attach(self, services: DriverServices) -> None:
        self.base.attach(services)

    def observe(self, event: Event, view: ClusterView) -> Sequence[Command]:
        self.predictor.learn_from(event)
        return self.base.observe(event, view)

    def loads(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView,
              slo: LatencySLO) -> list[float]:
        """The call's SLO load on each candidate (memoised across `shed` and `choose` of one decision)."""
        key = (cs.id, view.now, tuple(i.name for i in candidates))
        if self._memo is not None and self._memo[0] == key:
            return self._memo[1]
        loads = loads_of(self.predictor.predict(cs, candidates, view), slo)
        self._memo = (key, loads)
        return loads

    def shed(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> str | None:
        slo = cs.query.query.slo
        if not self.shedding or slo is None:
            return None
        loads = self.loads(cs, candidates, view, slo)
        if admits(loads, self.margin):
            return None
        self.counts["shed"] += 1
        k = min(range(len(loads)), key=loads.__getitem__)
        return (f"shed: no instance is predicted to meet the request's SLOs ({describe(slo)}); the best, "
                f"{candidates[k].name}, would use {loads[k]:.2f}× of them")

    def choose(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> InstanceState:
        slo = cs.query.query.slo
        if slo is None or len(candidates) == 1:
            target = self.base.choose(cs, candidates, view)
        else:
            target = self._choose_for(cs, candidates, view, slo)
        self.predictor.remember(cs, target, view)
        return target

    def _choose_for(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView,
                    slo: LatencySLO) -> InstanceState:
        self.counts["slo_calls"] += 1
        loads = self.loads(cs, candidates, view, slo)
        feasible = [(r, i) for r, i in zip(loads, candidates, strict=True) if r <= self.margin]
        if not feasible:
            self.counts["predicted_missed"] += 1
            k = max(range(len(loads)), key=lambda k: (headroom_score(loads[k]), -candidates[k].dispatched))
            return candidates[k]
        self.counts["predicted_met"] += 1
        if len(feasible) == 1:
            return feasible[0][1]
        return self.base.choose(cs, [i for _, i in feasible], view)


def describe(slo: LatencySLO) -> str:
    parts = []
    if slo.ttft_s is not None:
        parts.append(f"TTFT ≤ {slo.ttft_s * 1000:g} ms")
    if slo.tpot_s is not None:
        parts.append(f"TPOT ≤ {slo.tpot_s * 1000:g} ms")
    return ", ".join(parts)
