"""The token hit rate of a statement or plan (the paper's metric)."""

from __future__ import annotations


def token_hit_rate(hit_tokens: int, prompt_tokens: int) -> float:
    """THR = prompt tokens served from the KV cache / all prompt tokens (SPEC §3.4)."""
    return hit_tokens / prompt_tokens if prompt_tokens else 0.0
