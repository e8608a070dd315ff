"""One publisher's event stream, followed by its sequence numbers (sans-IO).

An engine's publisher (one per data-parallel rank) numbers its batches 0, 1, 2, ... and
keeps the latest ones for replay (vLLM: 10,000). `RankStream` takes what the subscriber
reads — live batches, replayed batches, the end or failure of a replay — and answers with
actions: batches to apply (in order), replays to ask for, and what to count and log.

* Start: with a replay socket, ask for everything from seq 0 and hold live batches until
  it ends; the view is complete when the replay starts at 0 (or nothing was published
  yet). A subscriber that joins late and cannot get the start is not complete: blocks
  cached before it joined are unknown (the trap of sglang #39750).
* A gap (seq jumps ahead): ask the replay from the first missing seq, holding live
  batches meanwhile; a replay that starts after it, fails or times out leaves a hole —
  the view is incomplete (`complete` False) until the rank's cache is cleared
  (`AllBlocksCleared`), the publisher restarts (seq 0 again: an empty cache), or a later
  replay from the hole succeeds (retried only after a replay failed; a short one cannot
  get better). Re-applying every batch from the hole onwards in order gives the true
  state whatever was applied before: each block ends as its last event says.
* A seq that goes backwards is stale (counted, dropped) unless it is 0: a restart.
* A batch that is not an EventBatch, or a known event that cannot be read, is a hole no
  replay fills (counted, logged); unknown events are counted and skipped.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from flowserve.kvevents.wire import WireBatch, WireError, decode_batch
from flowserve.types.kv import AllBlocksCleared, BlockRemoved, BlockStored, CacheChange

MAX_HELD = 100_000  # live batches held during a replay; beyond, newer ones are dropped (a gap, replayed later)
# a batch as read: its bytes, or already decoded (the subscriber decodes large ones off the event loop)
Payload = bytes | WireBatch


@dataclass(frozen=True, slots=True)
class Apply:
    changes: tuple[CacheChange, ...]


@dataclass(frozen=True, slots=True)
class AskReplay:
    start: int


@dataclass(frozen=True, slots=True)
class Lost:
    """The view misses something it cannot get back now."""

    reason: str


@dataclass(frozen=True, slots=True)
class Complete:
    reason: str


@dataclass(frozen=True, slots=True)
class Bad:
    """Something to count (`kind`) and log."""

    kind: str
    detail: str


Action = Apply | AskReplay | Lost | Complete | Bad


class RankStream:
    def __init__(self, rank: int, has_replay: bool) -> None:
        self.rank = rank
        self.has_replay = has_replay
        self.expected: int | None = None  # next seq to apply
        self.complete = False
        self.hole: int | None = 0  # first seq of the earliest hole not filled (at first: everything)
        self.retry_helps = False  # the last replay failed (a short one would stay short)
        self._replaying: int | None = None  # start of the replay in flight
        self._replay_first: int | None = None
        self._asked: int | None = None  # start of the last replay asked for
        self._covered = -1  # last seq a replay applied: live copies of it that follow are dropped quietly
        self._held: deque[tuple[int, Payload]] = deque()

    # ------------------------------------------------------------------ inputs

    def start(self) -> list[Action]:
        return self._ask(0) if self.has_replay else []

    def live(self, seq: int, payload: Payload) -> list[Action]:
        if self._replaying is not None:
            if len(self._held) >= MAX_HELD:
                return [Bad("overflow", f"rank {self.rank}: {MAX_HELD} batches held during a replay; seq {seq} "
                                        "dropped")]
            self._held.append((seq, payload))
            return []
        return self._next(seq, payload)

    def replayed(self, seq: int, payload: Payload) -> list[Action]:
        start = self._replaying
        if start is None or seq < start:
            return []  # not asked for
        if self._replay_first is None:
            self._replay_first = seq  # from here on every batch is applied again, in order
        elif self.expected is not None and seq < self.expected:
            return [Bad("stale", f"rank {self.rank}: replayed seq {seq} after {self.expected - 1}")]
        self._covered = max(self._covered, seq)
        return self._apply(seq, payload)

    def replay_done(self) -> list[Action]:
        """The replay socket sent its end marker."""
        start = self._replaying
        if start is None:
            return []
        first = self._replay_first
        out: list[Action] = []
        if first is None and start == 0 and self.expected is None:
            self.expected = 0
            out += self._completed("nothing published yet")
        elif first is None or first > start:
            got = "nothing" if first is None else f"from seq {first}"
            out.append(Bad("replay_short", f"rank {self.rank}: replay from {start} returned {got}"))
            out += self._lose(start, f"the engine's replay buffer no longer holds seq {start} (it returned {got})",
                              retry=False)
        elif self.hole is not None and self.hole >= start:
            out += self._completed(f"replayed from seq {start}")
        return out + self._drain()

    def replay_failed(self, reason: str) -> list[Action]:
        start = self._replaying
        if start is None:
            return []
        out: list[Action] = [Bad("replay_failed", f"rank {self.rank}: replay from {start}: {reason}")]
        out += self._lose(start, f"replay from seq {start} failed: {reason}", retry=True)
        return out + self._drain()

    def retry(self) -> list[Action]:
        """Periodically while incomplete: ask again for the hole, where that may help."""
        if self.complete or self.hole is None or not self.retry_helps or self._replaying is not None:
            return []
        return self._ask(self.hole)

    @property
    def replaying(self) -> bool:
        return self._replaying is not None

    # ------------------------------------------------------------------ internals

    def _ask(self, start: int) -> list[Action]:
        self._replaying = self._asked = start
        self._replay_first = None
        return [AskReplay(start)]

    def _drain(self) -> list[Action]:
        self._replaying = None
        self._replay_first = None
        out: list[Action] = []
        while self._held and self._replaying is None:
            seq, payload = self._held.popleft()
            out += self._next(seq, payload)
        return out

    def _next(self, seq: int, payload: Payload) -> list[Action]:
        exp = self.expected
        if seq <= self._covered:
            return []  # the replay applied it already (read live while the replay ran)
        self._covered = -1  # past the replayed batches: a seq 0 from now on is a restart
        if exp is None:  # the first batch seen, and no replay answered before it
            if seq == 0:
                out = self._completed("followed from seq 0")
            else:
                out = self._lose(0, f"joined at seq {seq}: blocks cached before are unknown",
                                 retry=self.has_replay)
            return out + self._apply(seq, payload)
        if seq == exp:
            return self._apply(seq, payload)
        if seq < exp:
            if seq == 0:  # the publisher restarted: its engine's cache starts empty
                out: list[Action] = [Bad("restart", f"rank {self.rank}: seq 0 after {exp - 1}"),
                                     Apply((AllBlocksCleared(self.rank),))]
                if not self.complete:
                    out += self._completed("the publisher restarted")
                return out + self._apply(0, payload)
            return [Bad("stale", f"rank {self.rank}: seq {seq} after {exp - 1}")]
        gap: list[Action] = [Bad("gap", f"rank {self.rank}: seq {seq} after {exp - 1} ({seq - exp} missed)")]
        if self.has_replay and self._asked != exp:
            self._held.appendleft((seq, payload))
            return gap + self._ask(exp)
        gap += self._lose(exp, f"{seq - exp} batch(es) from seq {exp} missed"
                          + ("" if self.has_replay else " (no replay socket)"), retry=False)
        return gap + self._apply(seq, payload)

    def _apply(self, seq: int, payload: Payload) -> list[Action]:
        self.expected = seq + 1
        try:
            batch = payload if isinstance(payload, WireBatch) else decode_batch(payload, self.rank)
        except WireError as e:
            return [Bad("malformed", f"rank {self.rank} seq {seq}: {e}"),
                    *self._lose(seq, f"batch {seq} is unreadable: {e}", retry=False)]
        out: list[Action] = [Bad("skipped", f"rank {self.rank} seq {seq}: {s}") for s in batch.skipped]
        if batch.changes:
            out.append(Apply(batch.changes))
        if batch.broken:
            out.append(Bad("broken", f"rank {self.rank} seq {seq}: {batch.broken[0]}"))
            out += self._lose(seq, f"batch {seq} has an unreadable event: {batch.broken[0]}", retry=False)
        elif not self.complete and any(isinstance(c, AllBlocksCleared) for c in batch.changes):
            out += self._completed(f"the engine cleared its cache (seq {seq})")
        return out

    def _lose(self, hole: int, reason: str, retry: bool) -> list[Action]:
        if self.hole is None or hole < self.hole:
            self.hole, self.retry_helps = hole, retry
        elif hole == self.hole:
            self.retry_helps = self.retry_helps or retry  # the same hole, seen again while draining
        self.complete = False
        return [Lost(reason)]

    def _completed(self, reason: str) -> list[Action]:
        self.hole = None
        self.retry_helps = False
        self.complete = True
        return [Complete(reason)]


def _blocks(c: CacheChange) -> int:
    return 1 if isinstance(c, AllBlocksCleared) else len(c.block_hashes)


def _pieces(c: CacheChange, most: int) -> list[CacheChange]:
    """One change as changes of at most `most` blocks each, applied in order to the same
    effect: a stored run's later pieces hang under the previous piece's last block."""
    if _blocks(c) <= most:
        return [c]
    hashes = c.block_hashes  # type: ignore[union-attr]
    if isinstance(c, BlockRemoved):
        return [BlockRemoved(c.rank, hashes[i:i + most]) for i in range(0, len(hashes), most)]
    assert isinstance(c, BlockStored)
    size = c.block_size
    return [BlockStored(c.rank, hashes[i:i + most], c.parent_hash if i == 0 else hashes[i - 1],
                        c.token_ids[i * size:(i + most) * size], size, c.lora) for i in range(0, len(hashes), most)]


def in_slices(changes: list[CacheChange], most: int) -> list[tuple[CacheChange, ...]]:
    """Changes in slices of at most `most` blocks, in order (a long stored run split):
    applied one slice per turn of the event loop, a huge batch never holds it whole."""
    out: list[tuple[CacheChange, ...]] = []
    cur: list[CacheChange] = []
    n = 0
    for c in changes:
        for piece in _pieces(c, most):
            k = _blocks(piece)
            if cur and n + k > most:
                out.append(tuple(cur))
                cur, n = [], 0
            cur.append(piece)
            n += k
    if cur:
        out.append(tuple(cur))
    return out
