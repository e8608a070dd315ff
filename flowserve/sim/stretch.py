"""The shape of a stretch of identical engine iterations (chunked prefill, vLLM's
scheduler): which prefill chunks one iteration computes, for how many iterations they
repeat, and the attention work they do. Pure functions of the sequences in prefill."""

from __future__ import annotations

from collections.abc import Sequence

from flowserve.sim.sequence import Seq

UNBOUNDED = 1 << 62


def prefill_portions(prefilling: Sequence[Seq], budget: int) -> tuple[list[tuple[Seq, int]], int]:
    """The prefill tokens each sequence gets per iteration within `budget` (oldest
    admission first) and how many iterations stay identical: a head longer than the
    budget takes k full chunks alone (a remainder is a mixed iteration of the next
    stretch); otherwise the budget is shared in one iteration."""
    if not prefilling or budget <= 0:
        return [], UNBOUNDED
    head = prefilling[0]
    if head.prefill_left > budget:
        return [(head, budget)], head.prefill_left // budget
    portions, left = [], budget
    for s in prefilling:
        if left <= 0:
            break
        take = min(left, s.prefill_left)
        portions.append((s, take))
        left -= take
    return portions, 1


def attended_tokens(portions: Sequence[tuple[Seq, int]], k: int) -> float:
    """Σ over the chunks of the tokens each new token attends to, at the stretch's
    mid-point: n tokens after `done` earlier ones attend n·offset + n(n+1)/2."""
    attended = 0.0
    for s, n in portions:
        done = s.prompt_len + s.pending - s.prefill_left  # tokens before this chunk
        offset = done + (n * (k - 1) / 2 if len(portions) == 1 else 0)
        attended += n * offset + n * (n + 1) / 2
    return attended


def computing_ahead(s: Seq, cached: int, prefilling: Sequence[Seq], budget: int) -> bool:
    """Whether a sequence in prefill is computing at least a chunk (`budget`) more of `s`'s
    prompt than the cache holds: then `s` waits for it to land in the cache instead of
    computing it twice (SGLang's in-batch prefix caching does the same)."""
    prompt = s.call.prompt
    need = cached + budget  # a shared prefix this long makes waiting pay
    if not prefilling or len(prompt) < need:
        return False
    head = prompt[:need]
    return any(p.pending == 0 and p.call.prompt[:need] == head for p in prefilling)
