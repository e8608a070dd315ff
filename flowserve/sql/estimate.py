"""What `--explain` reports about an LLM operator before it runs: calls, prompt tokens,
token hit rate of the planned send order, and time and cost from the cost model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flowserve.profiles.cost_model import CostModel


def token_hit_rate(hit_tokens: int, prompt_tokens: int) -> float:
    """THR = prompt tokens served from the KV cache / all prompt tokens (SPEC §3.4)."""
    return hit_tokens / prompt_tokens if prompt_tokens else 0.0


def prefix_hits(prompts: Sequence[Sequence[tuple[str, int]]]) -> list[int]:
    """Per prompt (a sequence of (part key, tokens) in layout order), the tokens of its
    longest leading run of parts that an earlier prompt began with (an unbounded cache
    at part granularity: the plan's ideal hit count)."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for parts in prompts:
        key: tuple[str, ...] = ()
        hit = 0
        matching = True
        for name, toks in parts:
            key = (*key, name)
            if matching and key in seen:
                hit += toks
            else:
                matching = False
                seen.add(key)
        out.append(hit)
    return out


@dataclass(frozen=True, slots=True)
class OperatorEstimate:
    calls: int
    rows: int
    prompt_tokens: int
    hit_tokens: int
    output_tokens: int
    time_s: float
    gpu_s: float
    usd: float

    @property
    def hit_rate(self) -> float:
        return token_hit_rate(self.hit_tokens, self.prompt_tokens)


def estimate_time_s(cost: CostModel, prompt_tokens: int, hit_tokens: int, output_tokens: int, calls: int,
                    batch: int) -> float:
    """Throughput estimate: the uncached prefill of every call, plus decode steps of
    `batch` sequences at a time (calls / batch waves of output/calls steps each)."""
    if calls == 0:
        return 0.0
    prefill = cost.prefill_time(prompt_tokens - hit_tokens, hit_tokens)
    steps = -(-calls // batch) * max(1, round(output_tokens / calls))
    ctx = batch * (prompt_tokens / calls)
    return prefill + steps * cost.decode_step_time(min(batch, calls), ctx)
