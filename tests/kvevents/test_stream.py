"""Sequence tracking of one publisher's stream: gaps, replays, restarts, bad batches."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.cache.block_index import BlockIndex
from flowserve.cache.prefix_index import PrefixIndex
from flowserve.kvevents.stream import Apply, AskReplay, Bad, Complete, Lost, RankStream, in_slices
from flowserve.kvevents.wire import encode_batch
from flowserve.types.kv import AllBlocksCleared, BlockRemoved, BlockStored


def batch(n: int) -> bytes:
    return encode_batch(float(n), [BlockRemoved(0, (n,))])


def applied(actions: list) -> list[int]:
    return [c.block_hashes[0] for a in actions if isinstance(a, Apply) for c in a.changes
            if isinstance(c, BlockRemoved)]


def kinds(actions: list) -> list[str]:
    return [a.kind for a in actions if isinstance(a, Bad)]


def test_start_with_replay_from_zero_is_complete() -> None:
    s = RankStream(0, has_replay=True)
    assert s.start() == [AskReplay(0)]
    assert s.live(2, batch(2)) == []  # held while the replay runs
    out = s.replayed(0, batch(0)) + s.replayed(1, batch(1)) + s.replay_done()
    assert applied(out) == [0, 1, 2]
    assert any(isinstance(a, Complete) for a in out) and s.complete


def test_fresh_engine_replays_nothing_and_is_complete() -> None:
    s = RankStream(0, has_replay=True)
    s.start()
    out = s.replay_done()
    assert s.complete and isinstance(out[0], Complete)
    assert applied(s.live(0, batch(0))) == [0]


def test_late_join_with_short_replay_is_incomplete_until_a_clear() -> None:
    s = RankStream(0, has_replay=True)
    s.start()
    out = s.replayed(40, batch(40)) + s.replay_done()
    assert applied(out) == [40] and not s.complete
    assert "replay_short" in kinds(out) and any(isinstance(a, Lost) for a in out)
    assert s.retry() == []  # a short buffer stays short: no retries
    out = s.live(41, encode_batch(1.0, [AllBlocksCleared(0)]))
    assert s.complete and any(isinstance(a, Complete) for a in out)


def test_gap_is_replayed_and_stays_complete() -> None:
    s = RankStream(0, has_replay=True)
    s.start()
    s.replay_done()
    s.live(0, batch(0))
    out = s.live(3, batch(3))
    assert out[-1] == AskReplay(1) and kinds(out) == ["gap"]
    out = s.replayed(1, batch(1)) + s.replayed(2, batch(2)) + s.replayed(3, batch(3)) + s.replay_done()
    assert applied(out) == [1, 2, 3] and s.complete  # 3 was held and dropped quietly: replayed already
    assert kinds(out) == []
    assert s.live(2, batch(2)) == []  # a live copy of a replayed batch, read after the replay: quiet too
    assert applied(s.live(4, batch(4))) == [4]


def test_failed_replay_loses_the_view_and_a_retry_restores_it() -> None:
    s = RankStream(0, has_replay=True)
    s.start()
    s.replay_done()
    s.live(0, batch(0))
    s.live(5, batch(5))
    out = s.replay_failed("timed out")
    assert not s.complete and isinstance(out[1], Lost) and "timed out" in out[1].reason
    assert applied(out) == [5]  # the held batch still applies
    assert s.retry() == [AskReplay(1)]
    out = [a for i in range(1, 6) for a in s.replayed(i, batch(i))] + s.replay_done()
    assert applied(out) == [1, 2, 3, 4, 5] and s.complete  # re-applied from the hole, in order


def test_without_replay_a_gap_is_lost_and_a_restart_restores() -> None:
    s = RankStream(1, has_replay=False)
    assert s.start() == []
    assert isinstance(s.live(0, batch(0))[0], Complete)
    out = s.live(4, batch(4))
    assert kinds(out) == ["gap"] and not s.complete and applied(out) == [4]
    assert s.retry() == []
    out = s.live(0, batch(0))  # the publisher restarted
    assert "restart" in kinds(out) and s.complete
    assert Apply((AllBlocksCleared(1),)) in out and applied(out) == [0]


def test_stale_and_malformed_batches_are_counted() -> None:
    s = RankStream(0, has_replay=False)
    s.live(0, batch(0))
    s.live(1, batch(1))
    assert kinds(s.live(1, batch(1))) == ["stale"]
    out = s.live(2, b"\xc1garbage")
    assert kinds(out) == ["malformed"] and not s.complete
    assert applied(s.live(3, batch(3))) == [3]


def test_join_late_without_replay_is_incomplete() -> None:
    s = RankStream(0, has_replay=False)
    out = s.live(9, batch(9))
    assert isinstance(out[0], Lost) and "joined at seq 9" in out[0].reason and applied(out) == [9]


def _changes(draw: st.DrawFn) -> list:
    """Stored runs (chained or fresh), removals and clears over engine hashes 1..."""
    out: list = []
    nxt = 1
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["stored", "stored", "removed", "cleared"]))
        if kind == "stored":
            n = draw(st.integers(1, 40))
            parent = draw(st.sampled_from([None, nxt - 1])) if nxt > 1 else None
            out.append(BlockStored(0, tuple(range(nxt, nxt + n)), parent, tuple(range(nxt * 4, (nxt + n) * 4)), 4))
            nxt += n
        elif kind == "removed" and nxt > 1:
            out.append(BlockRemoved(0, tuple(draw(st.lists(st.integers(1, nxt - 1), min_size=1, max_size=30)))))
        else:
            out.append(AllBlocksCleared(0))
    return out


@settings(max_examples=150, deadline=None)
@given(changes=st.composite(_changes)(), most=st.integers(1, 17))
def test_slices_are_bounded_and_apply_as_the_whole(changes: list, most: int) -> None:
    """Issue 44 item 6: a batch handed to the core in slices of at most `most` blocks leaves
    the block index exactly as the whole batch at once would."""
    whole, sliced = BlockIndex(PrefixIndex()), BlockIndex(PrefixIndex())
    apply_changes(whole, changes)
    slices = in_slices(changes, most)
    for piece in slices:
        assert sum(1 if isinstance(c, AllBlocksCleared) else len(c.block_hashes) for c in piece) <= most
        apply_changes(sliced, list(piece))
    assert sliced.held_blocks("a") == whole.held_blocks("a") and sorted(sliced.paths("a")) == sorted(whole.paths("a"))
    assert sliced.stats == whole.stats


def apply_changes(index: BlockIndex, changes: list) -> None:
    for c in changes:
        if isinstance(c, BlockStored):
            index.stored("a", c, 0.0)
        elif isinstance(c, BlockRemoved):
            index.removed("a", c, 0.0)
        else:
            index.cleared("a", c.rank, 0.0)
