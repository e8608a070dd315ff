"""Modelled prompt segments → token ids a real engine accepts (replays on real engines)."""

from __future__ import annotations

import numpy as np

from flowserve.graph.prompt import Segment
from flowserve.types.work import Tokens

RESERVED_IDS = 16  # keep clear of BOS/EOS and other special tokens at the low end


class TokenMaterializer:
    """Segments → token ids a real engine accepts, for replays: segment s is a
    pseudo-random run of ids from the model's vocabulary seeded by (salt, s), so equal
    segments are equal tokens, a shorter segment of the same id is a prefix of the
    longer one, and different segments differ from their first tokens on — the sharing
    structure the simulator sees, in real tokens."""

    def __init__(self, vocab_size: int, salt: int = 0) -> None:
        assert vocab_size > 2 * RESERVED_IDS
        self.vocab = vocab_size
        self.salt = salt
        self._cache: dict[int, np.ndarray] = {}

    def run(self, seg: Segment) -> np.ndarray:
        """The segment's ids as an array (a view: do not write to it)."""
        run = self._cache.get(seg.id)
        if run is None or len(run) < seg.length:
            rng = np.random.default_rng([self.salt, seg.id])
            run = rng.integers(RESERVED_IDS, self.vocab - RESERVED_IDS, size=max(seg.length, 64))
            self._cache[seg.id] = run
        return run[: seg.length]

    def segment(self, seg: Segment) -> Tokens:
        return tuple(self.run(seg).tolist())

    def prompt(self, segments: tuple[Segment, ...]) -> Tokens:
        out: Tokens = ()
        for seg in segments:
            out += self.segment(seg)
        return out
