"""Prompts back to segment lists, so a recorded trace keeps its prefix-sharing structure.

A simulated prompt is a `Materializer` output and decodes exactly; a live prompt (real
token ids) becomes prefix-chained blocks, so two prompts share segment ids exactly as far
as their tokens match, block by block (like an engine's block hashes).
"""

from __future__ import annotations

from flowserve.graph.plan import MAX_SEGMENT, Segment
from flowserve.types import Tokens

BLOCK = 64  # tokens per segment when a prompt is real token ids (live engines)
_FIRST_SYNTHETIC_ID = 1 << 40  # above any id a workload generator hands out
_ZEROS = (0,) * MAX_SEGMENT  # a Materializer's filler tokens


def prompt_segments(prompt: Tokens, blocks: BlockIds) -> tuple[Segment, ...]:
    """A prompt as segments. Materialised prompts (`graph.plan.Materializer`: a negative
    marker, then zeros) decode exactly, finding each segment's end by bisection;
    real token ids become prefix-chained blocks, so equal prefixes get equal ids."""
    n = len(prompt)
    if n == 0:
        return (Segment(blocks.unique(), 1),)
    if prompt[0] >= 0:
        return blocks.chain(prompt)
    segs, i = [], 0
    while i < n:
        # a segment is its marker followed by filler zeros up to the next marker
        lo, hi = 1, min(n - i, MAX_SEGMENT)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if prompt[i + 1 : i + mid] == _ZEROS[: mid - 1]:
                lo = mid
            else:
                hi = mid - 1
        segs.append(Segment(-prompt[i] - 1, lo))
        i += lo
    return tuple(segs)


class BlockIds:
    """Segment ids for prompts of real tokens (prefix-chained block hashes) and unique ids."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, int], int] = {}
        self._next = _FIRST_SYNTHETIC_ID

    def unique(self) -> int:
        self._next += 1
        return self._next

    def chain(self, prompt: Tokens) -> tuple[Segment, ...]:
        segs, prev = [], 0
        for start in range(0, len(prompt), BLOCK):
            block = prompt[start:start + BLOCK]
            key = (prev, hash(block))
            sid = self._ids.get(key)
            if sid is None:
                sid = self._ids[key] = self.unique()
            segs.append(Segment(sid, len(block)))
            prev = sid
        return tuple(segs)
