"""The batching sweet spot of an engine: how many sequences it serves well at once.

Iteration-level batching (Orca, Yu et al., OSDI '22; vLLM) runs one decode step for every
running sequence. While the step is bound by reading the weights, an added sequence adds
nearly a lone sequence's throughput and slows the others little; once compute, or the KV
reads of long contexts, bound the step, an added sequence adds little throughput and
slows every running one. The sweet spot is the largest batch whose last sequence still
adds at least `gain` of a lone sequence's throughput. For a step linear in the batch,
step(b) = a + k·b, the marginal throughput a / step(b)² falls to half the lone
sequence's when step(b) = √2 · step(1): at the default `gain` = 0.5 every running call
decodes at most ~1.41× slower than alone. An engine with no batching gain (a CPU
llama-server, whose step doubles with the batch) has a sweet spot of one sequence.

The `flowserve` queue's gate decides where the spot holds (`flowserve.policies.flowserve_gate`).

Pure functions of a cost model (`flowserve.profiles.cost_model.CostModel`); the
`SweetSpots` memo rounds the context to a power of two, so a policy asks the cost model
once per (profile, context bucket).
"""

from __future__ import annotations

import math

from flowserve.profiles.cost_model import CostModel

DEFAULT_GAIN = 0.35  # chosen once on every workload of bench compare (docs/policies.md)


def batch_throughput(cost: CostModel, batch: int, context: float) -> float:
    """Tokens per second of `batch` decoding sequences of `context` tokens each: b / step(b, b·c)."""
    return batch / cost.decode_step_time(batch, batch * context)


def marginal_throughput(cost: CostModel, batch: int, context: float) -> float:
    """What the batch-th sequence adds: throughput(b) − throughput(b − 1)."""
    before = batch_throughput(cost, batch - 1, context) if batch > 1 else 0.0
    return batch_throughput(cost, batch, context) - before


def sweet_spot(cost: CostModel, context: float, cap: int, gain: float = DEFAULT_GAIN) -> int:
    """The largest batch b ≤ cap (at least 1) whose b-th sequence adds ≥ gain × a lone
    sequence's throughput (module docstring). The throughput of a step that is convex in
    the batch (the roofline's, a fitted linear one) is concave, so the marginal only falls:
    doubling then bisection finds the edge in O(log cap) steps."""
    if cap <= 1 or gain <= 0.0:
        return max(cap, 1)
    floor = gain * batch_throughput(cost, 1, context)

    def good(b: int) -> bool:
        return marginal_throughput(cost, b, context) >= floor

    lo = 1  # good(lo) holds (the lone sequence adds all of its own throughput)
    hi = 2
    while hi <= cap and good(hi):
        lo, hi = hi, hi * 2
    if hi > cap:
        if good(cap):
            return cap
        hi = cap
    while hi - lo > 1:  # good(lo), not good(hi)
        mid = (lo + hi) // 2
        if good(mid):
            lo = mid
        else:
            hi = mid
    return lo


def context_bucket(context: float) -> int:
    """The power of two at or above `context` (at least 64): the memo's key."""
    return 1 << max(6, math.ceil(math.log2(max(context, 1.0))))


class SweetSpots:
    """Memoised `sweet_spot` per (cost model, context bucket, cap); one per policy object."""

    __slots__ = ("_gain", "_memo")

    def __init__(self, gain: float = DEFAULT_GAIN) -> None:
        if not 0.0 <= gain <= 1.0:
            raise ValueError(f"gain must be in [0, 1], got {gain}")
        self._gain = gain
        # keyed by the cost model's id; the entry holds the model, so the id is not reused
        self._memo: dict[tuple[int, int, int], tuple[CostModel, int]] = {}

    def __call__(self, cost: CostModel, context: float, cap: int) -> int:
        bucket = context_bucket(context)
        key = (id(cost), bucket, cap)
        entry = self._memo.get(key)
        if entry is None:
            entry = self._memo[key] = (cost, sweet_spot(cost, bucket, cap, self._gain))
        return entry[1]
