"""llm-d's predicted-latency scheduling as a dispatch policy (`llmd_slo`): the Gateway API
Inference Extension's SLO-aware router (`pkg/epp/scheduling/framework/plugins/multi/
slo_aware_router`) with the latency predictor of its sidecars (`latencypredictor/`), as
llm-d's "predicted latency based scheduling" guide deploys them.

* **Predictor**: one model for the whole pool (the guide: "predictors assume that all model
  server pods are identical … heterogeneous pools are not yet modeled"), on the pod
  metrics the EPP scrapes — KV-cache utilisation, the request's input tokens, waiting and
  running requests, the prefix-cache score (matched 64-token blocks / blocks) and the
  uncached input, (1 − prefix score) × input tokens — predicting p90 TTFT and TPOT with
  gradient-boosted trees (the guide's XGBoost with a quantile objective; here
  scikit-learn's histogram boosting, `hgb_p90`), retrained as samples arrive (every
  `refit` samples instead of every second, so a simulation replays exactly). Until it has
  `warmup` samples, the guide's default profile decides (`llmd`: prefix, KV, queue).
* **Validity**: a pod is valid for a request when the predicted TTFT < the TTFT SLO and the
  predicted TPOT < the TPOT SLO × `buffer`, the TPOT bound lowered to the smallest TPOT
  SLO of the requests already running there (their TPOT is protected too).
* **Affinity gate**: with probability 1 − `epsilon`, only pods with a prefix score ≥
  `tau_global` (0.99) are considered, when there are any; inside the positive tier again
  with `tau` (0.8).
* **Tiers**: with both headroom kinds positive, a pod is in the positive tier. With pods in
  both tiers, the negative one is drawn with probability `epsilon` (0.01). Positive tier:
  a weighted draw that favours the least headroom ("least" strategy: packing), weight
  int((1 − c) · 99) + 2 for c = 0.8 · normalised TTFT headroom + 0.2 · normalised TPOT
  headroom. Negative tier: pods with no running request first; a draw weighted int((1 − b)
  · 80) + 2 for b the blend (0.8, 0.2) of the deficits normalised within each category
  (both negative, TTFT only, TPOT only).
* **Shedding**: a sheddable request (priority < 0) that no pod is valid for, when every
  pod runs requests, is refused (the router's `HasValidPod = false`).

Draws use the policy's own seeded generator, so a simulation replays exactly.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.policy import DispatchPolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.policies.scoring.dispatch import ScoredDispatch
from flowserve.policies.scoring.profile import shipped_profile
from flowserve.policies.scoring.scorers.kv_free import kv_utilization
from flowserve.policies.scoring.scorers.prefix_hit import block_hit
from flowserve.policies.slo.predictor import Latency, LatencyPredictor
from flowserve.types.commands import Command
from flowserve.types.events import Event
from flowserve.types.work import LatencySLO

LLMD_FEATURES = ("kv_cache_percentage", "input_token_length", "num_request_waiting", "num_request_running",
                 "prefix_cache_score", "effective_input_tokens")
BLOCK = 64  # the prefix-cache scorer's block size in tokens
TTFT_WEIGHT, TPOT_WEIGHT = 0.8, 0.2  # HEADROOM_TTFT_WEIGHT / _TPOT_ (and NEG_HEADROOM_*) defaults


def llmd_features(cs: CallState, inst: InstanceState, view: ClusterView) -> tuple[float, ...]:
    """The sidecar's features (`LLMD_FEATURES`) of the request on a pod."""
    prefix = block_hit(view.cached_tokens(cs, inst), cs.input_tokens, BLOCK)
    return (kv_utilization(inst), float(cs.input_tokens), float(len(inst.queue)), float(len(inst.running)),
            prefix, (1.0 - prefix) * cs.input_tokens)


def normalise(values: Sequence[float]) -> list[float]:
    """(v − min) / (max − min) within the cohort; all 0.5 when they are equal (the router's rule)."""
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-9:
        return [0.5] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


def deficit_blend(rows: Sequence[tuple[InstanceState, float, float, float]]) -> list[float]:
    """0.8 · normalised TTFT deficit + 0.2 · normalised TPOT deficit (0 where all are equal)."""
    def norm(values: list[float]) -> list[float]:
        lo, hi = min(values), max(values)
        return [0.0] * len(values) if hi - lo <= 1e-9 else [(v - lo) / (hi - lo) for v in values]

    ttft = norm([max(-r[1], 0.0) for r in rows])
    tpot = norm([max(-r[2], 0.0) for r in rows])
    return [TTFT_WEIGHT * a + TPOT_WEIGHT * b for a, b in zip(ttft, tpot, strict=True)]


class LLMDPredictedLatency(DispatchPolicy):
    """See the module docstring."""

    name = "llmd_slo"
    shares_prefills = False  # the router dispatches every request at once
    needs_prefix_index = True
    prefix_window_s = 0.0

    def __init__(self,
                 model: Annotated[str, Help("the pool's latency model (the guide's p90 gradient-boosted trees: "
                                            "`hgb_p90`)")] = "hgb_p90",
                 warmup: Annotated[int, Help("samples before the model predicts; until then the default `llmd` "
                                             "profile decides")] = 100,
                 buffer: Annotated[float, Help("a pod is valid when the predicted TPOT < the TPOT SLO × buffer; "
                                               "> 0")] = 1.0,
                 epsilon: Annotated[float, Help("probability of drawing from the negative tier (and of skipping "
                                                "the affinity gate), in [0, 1]")] = 0.01,
                 tau: Annotated[float, Help("the prefix score a pod needs inside the positive tier's affinity "
                                            "gate")] = 0.8,
                 tau_global: Annotated[float, Help("the prefix score a pod needs to pass the first affinity "
                                                   "gate")] = 0.99,
                 seed: Annotated[int, Help("the draws' and the model's seed")] = 0) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        if buffer <= 0:
            raise ValueError(f"buffer must be > 0, got {buffer}")
        self.predictor = LatencyPredictor(model, seed, warmup, group="pool", features=llmd_features, fallback=None)
        self.default = ScoredDispatch(shipped_profile("llmd"))
        self.buffer = buffer
        self.epsilon = epsilon
        self.tau = tau
        self.tau_global = tau_global
        self.rng = random.Random(seed)
        self._memo: tuple[tuple, list] | None = None
        self.stats = {"slo_calls": 0, "positive": 0, "negative": 0, "shed": 0, "default_profile": 0}

    def observe(self, event: Event, view: ClusterView) -> Sequence[Command]:
        self.predictor.learn_from(event)
        return ()

    def _rows(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView,
              slo: LatencySLO) -> list[tuple[InstanceState, float, float, float]] | None:
        """(pod, TTFT headroom, TPOT headroom, prefix score) per candidate; None while the
        predictor is not trained."""
        key = (cs.id, view.now, tuple(i.name for i in candidates))
        if self._memo is not None and self._memo[0] == key:
            return self._memo[1]
        preds = self.predictor.predict(cs, candidates, view)
        rows = None
        if all(p is not None for p in preds):
            rows = [self._row(cs, inst, p, slo, view) for inst, p in zip(candidates, preds, strict=True)]  # type: ignore[arg-type]
        self._memo = (key, rows)
        return rows

    def _row(self, cs: CallState, inst: InstanceState, p: Latency, slo: LatencySLO,
             view: ClusterView) -> tuple[InstanceState, float, float, float]:
        ttft_slo = slo.ttft_s if slo.ttft_s is not None else 0.0  # no SLO: SLO = 0, the lowest latency wins
        tpot = (slo.tpot_s if slo.tpot_s is not None else 0.0) * self.buffer
        running = [c.query.query.slo.tpot_s for c in inst.running.values()
                   if c.query.query.slo is not None and c.query.query.slo.tpot_s is not None]
        if running:
            tpot = min(tpot, min(running) * self.buffer) if tpot > 0 else min(running) * self.buffer
        prefix = block_hit(view.cached_tokens(cs, inst), cs.input_tokens, BLOCK)
        return inst, ttft_slo - p[0], tpot - p[1], prefix

    def _gate(self, rows: list, tau: float) -> tuple[list, bool]:
        """The affinity gate: the pods whose prefix score reaches `tau`, unless ε explores."""
        sticky = [r for r in rows if r[3] >= tau]
        if not sticky or self.rng.random() < self.epsilon:
            return rows, False
        return sticky, True

    def shed(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> str | None:
        slo = cs.query.query.slo
        if slo is None:
            return None
        rows = self._rows(cs, candidates, view, slo)
        if rows is None or any(r[1] > 0 and r[2] > 0 for r in rows) or any(not r[0].running for r in rows):
            return None
        self.stats["shed"] += 1
        return "shed: no pod is predicted to meet the request's SLOs (llm-d's HasValidPod = false)"

    def choose(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> InstanceState:
        slo = cs.query.query.slo
        rows = None if slo is None else self._rows(cs, candidates, view, slo)
        if rows is None:
            self.stats["default_profile"] += 1
            target = self.default.choose(cs, candidates, view)
        else:
            self.stats["slo_calls"] += 1
            target = self._pick(rows)
        self.predictor.remember(cs, target, view)
        return target

    def _pick(self, rows: list) -> InstanceState:
        rows, _ = self._gate(rows, self.tau_global)
        positive = [r for r in rows if r[1] > 0 and r[2] > 0]
        negative = [r for r in rows if not (r[1] > 0 and r[2] > 0)]
        if positive and (not negative or self.rng.random() >= self.epsilon):
            self.stats["positive"] += 1
            return self._positive(positive)
        self.stats["negative"] += 1
        return self._negative(negative)

    def _draw(self, rows: list, weights: list[int]) -> InstanceState:
        k = self.rng.randrange(sum(weights))
        for r, w in zip(rows, weights, strict=True):
            if k < w:
                return r[0]
            k -= w
        return rows[0][0]

    def _positive(self, rows: list) -> InstanceState:
        if len(rows) == 1:
            return rows[0][0]
        rows, sticky = self._gate(rows, self.tau)
        if sticky and len(rows) == 1:
            return rows[0][0]
        ttft, tpot = normalise([r[1] for r in rows]), normalise([r[2] for r in rows])
        combined = [TTFT_WEIGHT * a + TPOT_WEIGHT * b for a, b in zip(ttft, tpot, strict=True)]
        return self._draw(rows, [int((1.0 - c) * 99) + 2 for c in combined])

    def _negative(self, rows: list) -> InstanceState:
        if len(rows) == 1:
            return rows[0][0]
        idle = [r for r in rows if not r[0].running]
        rows = idle or rows
        if len(rows) == 1:
            return rows[0][0]
        rows, sticky = self._gate(rows, self.tau)
        if sticky and len(rows) == 1:
            return rows[0][0]
        # the router's categories — both deficits, TTFT only, TPOT only — each weighed by its own
        # normalised deficits (equal deficits: 0, none worse), and the rest at the minimum weight
        drawn, weights = [], []
        for cat in ((True, True), (True, False), (False, True)):
            group = [r for r in rows if (r[1] < 0, r[2] < 0) == cat]
            if group:
                drawn += group
                weights += [int((1.0 - b) * 80) + 2 for b in deficit_blend(group)]
        rest = [r for r in rows if r[1] >= 0 and r[2] >= 0]
        return self._draw(drawn + rest, weights + [1] * len(rest))
