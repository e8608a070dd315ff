"""Preble's formulas (Srivatsa et al., §4.2–4.3) as pure functions.

Prefill times come from the instance's cost model (Preble fits a regression on token
counts; our roofline model is the same interface). Every function is unit-tested
against a hand-computed example in tests/test_preble_policies.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from flowserve.profiles.cost_model import CostModel


def should_exploit(matched: int, total: int) -> bool:
    """Preble §4.2: exploit when the matched prefix is longer than the unmatched rest."""
    return matched > total - matched


def load_cost(window_prefill_s: float, window_requests: int, mean_decode_s: float) -> float:
    """Preble Alg. 2: L_i = Σ_{r∈W} (PT_r + DT_r), DT_r = the window's mean decode time."""
    return window_prefill_s + window_requests * mean_decode_s


def eviction_cost(evicted: Iterable[tuple[float, int]]) -> float:
    """Preble Alg. 2: M_i = Σ_j PT_j · N_j over the nodes j instance i evicts (PT_j, N_j)."""
    return sum(pt * n for pt, n in evicted)


def run_cost(cost: CostModel, uncached_tokens: int, cached_tokens: int = 0) -> float:
    """Preble Alg. 2: R_i = prefill time of the request's tokens not cached on i."""
    return cost.prefill_time(uncached_tokens, cached_tokens) if uncached_tokens > 0 else 0.0


def is_decode_unit(prefill_s: float, decode_s: float) -> bool:
    """Preble §4.2 P/D balancing: a request whose (uncached) prefill costs less than its
    decode acts as a decode-phase unit, otherwise as a prefill-phase unit."""
    return prefill_s < decode_s


def overloaded(load: float, lightest: float, t_hbal: float) -> bool:
    """Preble §4.2 rebalancing trigger: load > T_hbal × the lightest instance's load."""
    return load > t_hbal * lightest


def doubled(earlier: Iterable[float], recent: Iterable[float], factor: float = 2.0,
            min_samples: int = 3) -> bool:
    """Preble §4.2 autoscaling trigger: mean of the latest half-window ≥ factor × mean of
    the earlier half (with at least `min_samples` in each half)."""
    a, b = list(earlier), list(recent)
    if len(a) < min_samples or len(b) < min_samples:
        return False
    return sum(b) / len(b) >= factor * (sum(a) / len(a))


def queueing_time(ttft_s: float, prefill_s: float) -> float:
    """Preble §4.2 autoscaling watches a prefix's queueing time: the time to first token
    less the request's own (uncached) prefill, at least 0."""
    return max(0.0, ttft_s - prefill_s)


def run_window(window_s: float, elapsed_s: float, floor_s: float = 1.0) -> float:
    """The history window H in use `elapsed_s` after the first request: Preble's H, or the
    time the run has lasted when that is shorter (at least `floor_s`), so that the halves
    of the replication test hold the run's earlier and later halves in short runs too."""
    return min(window_s, max(elapsed_s, floor_s))


def priority_group(cached_tokens: int, prompt_tokens: int, groups: int) -> int:
    """Preble §4.3 / SPEC §3.2: group = ceil(hit · P) − 1, 0 without a hit."""
    if prompt_tokens <= 0 or cached_tokens <= 0:
        return 0
    hit = min(cached_tokens, prompt_tokens) / prompt_tokens
    return max(0, min(groups - 1, math.ceil(hit * groups - 1e-9) - 1))


def group_quota(group: int) -> int:
    """Preble's local scheduler: group g releases up to (g + 1) · 10 requests per round."""
    return (group + 1) * 10
