"""What `flowserve profile` measures, and how it fits the run into a time budget.

The full plan (`ProfileSettings()`) prefills about 48,000 tokens per round, three rounds:
minutes on a fast engine, hours on a slow one (a 135M model on a busy 2-core CPU prefills
~40 tokens/s). So the profiler first probes the engine's speed (one cold prefill, a few
decode steps) and `fit_to_budget` shrinks the plan until `round_seconds` × repeats fits
the budget: fewer repeats first, then every length scaled by one factor (the points keep
their shape — short and long prompts, small and large batches — over a smaller range).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

MIN_LENGTH = 16  # no point is scaled below this many tokens


@dataclass(frozen=True)
class ProfileSettings:
    prefill_lengths: tuple[int, ...] = (16, 64, 256, 512, 1024, 2048, 3072)
    batch_sizes: tuple[int, ...] = (1, 2, 4)
    decode_contexts: tuple[int, ...] = (32, 1024, 2048)
    decode_tokens: int = 64
    cached_prefixes: tuple[int, ...] = (512, 2048)
    cached_suffixes: tuple[int, ...] = (32, 128)  # both sides of llama.cpp's 64-row attention switch
    narrow_prefill_tokens: int | None = None  # None: 64 for llama-server, 0 for other engines
    repeats: int = 3
    # whole requests (cached prefix, new tokens, output tokens): their latency beyond the
    # fitted iterations is the profile's request_overhead_s
    request_shapes: tuple[tuple[int, int, int], ...] = ((0, 64, 16), (512, 32, 24), (2048, 32, 24))
    # (decoding requests, their prompt tokens, new prompt tokens) of the mixed family;
    # decoders are capped at slots − 1
    mixed_shapes: tuple[tuple[int, int, int], ...] = ((1, 256, 32), (1, 256, 128), (1, 1024, 512), (2, 256, 256))
    token_budget: int = 2048  # llama-server's -b (n_batch); vLLM's max_num_batched_tokens
    seed: int = 0
    budget_s: float | None = None  # the whole measurement's time budget (None: no limit)

    @classmethod
    def quick(cls, **overrides: Any) -> ProfileSettings:
        """A few seconds: enough points to fit, too few for a trustworthy profile."""
        quick = {"prefill_lengths": (16, 128, 512), "batch_sizes": (1, 2), "decode_contexts": (16, 256),
                 "decode_tokens": 24, "cached_prefixes": (256,), "cached_suffixes": (32,), "repeats": 1,
                 "request_shapes": ((0, 32, 8), (256, 32, 8)), "mixed_shapes": ((1, 128, 128),)}
        return cls(**(quick | overrides))


@dataclass(frozen=True)
class EngineSpeed:
    prefill_s_per_token: float  # a cold prefill's seconds per prompt token
    decode_step_s: float  # one decode step of one sequence


def round_seconds(s: ProfileSettings, speed: EngineSpeed) -> float:
    """Estimated seconds of one round of the plan: every prompt token it prefills and every
    decode step it waits for (a batch of b steps ~ (1 + (b − 1)/4) single steps, as CPU
    and GPU engines batch; the exact figure only sizes the plan)."""
    p, d = speed.prefill_s_per_token, speed.decode_step_s
    t = sum(n * p for n in set(s.prefill_lengths))
    t += sum(b * c * p + s.decode_tokens * d * (1 + (b - 1) / 4)
             for b in set(s.batch_sizes) for c in set(s.decode_contexts))
    t += sum((pre + 2 * suf) * p for pre in set(s.cached_prefixes) for suf in set(s.cached_suffixes))
    t += sum((dec * ctx + new) * p + 2 * d for dec, ctx, new in s.mixed_shapes)
    t += sum((pre + 2 * new) * p + out * d for pre, new, out in s.request_shapes)
    return t


def scaled(s: ProfileSettings, factor: float) -> ProfileSettings:
    """Every token length of the plan × factor (at least MIN_LENGTH; suffixes, which sit on
    both sides of a fixed attention switch, and output lengths stay)."""
    def f(n: int) -> int:
        return max(MIN_LENGTH, round(n * factor)) if n > 0 else 0

    def fs(ns: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sorted({f(n) for n in ns}))

    return replace(s, prefill_lengths=fs(s.prefill_lengths), decode_contexts=fs(s.decode_contexts),
                   cached_prefixes=fs(s.cached_prefixes),
                   request_shapes=tuple((f(pre), new, out) for pre, new, out in s.request_shapes),
                   mixed_shapes=tuple(sorted({(dec, f(ctx), f(new)) for dec, ctx, new in s.mixed_shapes})))


def fit_to_budget(s: ProfileSettings, speed: EngineSpeed) -> tuple[ProfileSettings, str | None]:
    """The plan within `s.budget_s` (unchanged when it fits or has no budget), and a note
    saying what was cut."""
    if s.budget_s is None:
        return s, None
    one = round_seconds(s, speed)
    if one * s.repeats <= s.budget_s:
        return s, None
    if one <= s.budget_s:
        repeats = int(s.budget_s // one)
        return replace(s, repeats=repeats), (f"{s.repeats} rounds need ~{one * s.repeats:.0f} s at this engine's "
                                             f"speed: {repeats} within the budget of {s.budget_s:.0f} s")
    lo, hi = 0.0, 1.0  # the largest factor whose single round fits, to 1%
    while hi - lo > 0.01:
        mid = (lo + hi) / 2
        if round_seconds(scaled(s, mid), speed) <= s.budget_s:
            lo = mid
        else:
            hi = mid
    out = replace(scaled(s, max(lo, 0.01)), repeats=1)
    return out, (f"one round of the full plan needs ~{one:.0f} s at this engine's speed: one round with every "
                 f"length × {lo:.2f} (up to {max(out.prefill_lengths)} tokens) fits the budget of {s.budget_s:.0f} s")
