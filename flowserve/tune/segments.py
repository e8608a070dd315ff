"""Prompts of the workflow IR back to segment lists, so a recorded trace keeps its
prefix-sharing structure.

Segments stay what they are; token ids and text (tokenized with the simulator's word
hash) become prefix-chained blocks, so two prompts share segment ids exactly as far as
their tokens match, block by block (like an engine's block hashes).
"""

from __future__ import annotations

from flowserve.graph.prompt import MAX_SEGMENT, Chat, Lit, Prompt, Segment, Toks
from flowserve.tokenize.chat import chat_parts
from flowserve.tokenize.words import word_ids
from flowserve.types.work import Tokens

BLOCK = 64  # tokens per segment when a prompt is token ids or text
_FIRST_SYNTHETIC_ID = 1 << 40  # above any id a workload generator hands out


def prompt_segments(prompt: Prompt, blocks: BlockIds) -> tuple[Segment, ...]:
    """A (resolved) prompt as segments; runs of ids or text are chained into blocks."""
    segs: list[Segment] = []
    run: list[int] = []
    for p in (q for part in prompt for q in (chat_parts(part) if isinstance(part, Chat) else (part,))):
        if isinstance(p, Segment):
            if run:
                segs.extend(blocks.chain(tuple(run), segs[-1].id if segs else 0))
                run = []
            segs.append(p)
        elif isinstance(p, Toks):
            run.extend(p.ids)
        elif isinstance(p, Lit):
            run.extend(word_ids(p.text))
    if run:
        segs.extend(blocks.chain(tuple(run), segs[-1].id if segs else 0))
    return tuple(segs) or (Segment(blocks.unique(), 1),)


class BlockIds:
    """Segment ids for runs of tokens (prefix-chained block hashes) and unique ids."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, int], int] = {}
        self._next = _FIRST_SYNTHETIC_ID

    def unique(self) -> int:
        self._next += 1
        return self._next

    def chain(self, tokens: Tokens, prev: int = 0) -> tuple[Segment, ...]:
        """`tokens` as blocks; `prev` is the segment before them (0: the prompt's start)."""
        segs = []
        for start in range(0, len(tokens), BLOCK):
            block = tokens[start:start + BLOCK]
            key = (prev, hash(block))
            sid = self._ids.get(key)
            if sid is None:
                sid = self._ids[key] = self.unique()
            segs.append(Segment(sid, len(block)))
            prev = sid
        return tuple(segs)


assert BLOCK <= MAX_SEGMENT
