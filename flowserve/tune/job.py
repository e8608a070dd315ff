"""The α sweep as a job (Hexgen §4.3): its plain-data arguments and result, and the test
that decides when to re-tune. The online tuner asks the driver to run the sweep by name
(`RunJob(ALPHA_SWEEP, (SweepJob,))`); `flowserve.tune.alpha` implements it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flowserve.policies.hexgen import DEFAULT_BETA
from flowserve.profiles.cost_model import CostModel
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.base import Workload

ALPHA_SWEEP = "alpha_sweep"
COARSE = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
FINE_STEP = 0.1


@dataclass(frozen=True)
class SweepJob:
    workload: Workload
    cluster: tuple[InstanceSpec, ...]
    cost_models: Mapping[str, CostModel] | None = None  # None: the catalog rooflines
    deadlines: tuple[float | None, ...] | None = None  # per query, seconds after arrival
    queue: str = "urgency"
    queue_params: Mapping[str, Any] = field(default_factory=dict)
    beta: float = DEFAULT_BETA
    coarse: tuple[float, ...] = COARSE
    fine_step: float = FINE_STEP


@dataclass(frozen=True)
class SweepResult:
    alpha: float
    mean_latency: Mapping[float, float]  # every α simulated, in the order simulated
    queries: int
    calls: int


def latency_regressed(new: Sequence[float], ref: Sequence[float], p_value: float = 0.01) -> tuple[bool, float]:
    """One-sided Welch t-test, H1: mean(new) > mean(ref). Returns (p < p_value, p).

    Fewer than two samples on a side, or no variance at all, is no evidence (p = 1)."""
    if len(new) < 2 or len(ref) < 2 or (min(new) == max(new) and min(ref) == max(ref)):
        return False, 1.0
    from scipy import stats  # here: scipy.stats costs every gateway's start-up a second or more

    p = float(stats.ttest_ind(new, ref, equal_var=False, alternative="greater").pvalue)
    if math.isnan(p):
        return False, 1.0
    return p < p_value, p
