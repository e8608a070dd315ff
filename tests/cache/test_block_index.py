"""The block index: engine hashes resolved to flowserve's own, mirrored into the prefix index."""

from __future__ import annotations

from flowserve.cache.block_index import (
    BLOCK_BYTES,
    HOLDING_BYTES,
    TOKEN_BYTES,
    BlockIndex,
    block_hash,
    prompt_block_hashes,
)
from flowserve.cache.prefix_index import PrefixIndex
from flowserve.types.kv import BlockRemoved, BlockStored

PROMPT = tuple(range(1000, 1048))  # three blocks of 16


def stored(hashes: tuple, parent: object, tokens: tuple, rank: int = 0, lora: str | None = None) -> BlockStored:
    return BlockStored(rank, hashes, parent, tokens, 16, lora)  # type: ignore[arg-type]


def test_own_hash_is_chained_and_folds_the_lora_name() -> None:
    a = block_hash(None, PROMPT[:16])
    assert prompt_block_hashes(PROMPT, 16) == [a, block_hash(a, PROMPT[16:32]), block_hash(block_hash(a, PROMPT[16:32]),
                                                                                             PROMPT[32:48])]
    assert block_hash(None, PROMPT[:16], "sql-lora") != a
    assert block_hash(None, PROMPT[:16]) == a  # stable: no per-process seed
    assert prompt_block_hashes(PROMPT[:15], 16) == []


def test_engine_hashes_resolve_and_the_view_mirrors_them() -> None:
    view = PrefixIndex()
    idx = BlockIndex(view)
    assert idx.stored("a", stored((b"e1", b"e2"), None, PROMPT[:32]), 1.0) == 2
    assert idx.stored("a", stored((b"e3",), b"e2", PROMPT[32:48]), 1.0) == 1
    assert idx.holds("a", PROMPT, 16) == 48
    assert view.match_by_instance(PROMPT)[1] == {"a": 48}
    idx.removed("a", BlockRemoved(0, (b"e2",)), 2.0)  # the middle block: its child is unreachable
    assert idx.holds("a", PROMPT, 16) == 16
    assert view.match_by_instance(PROMPT)[1] == {"a": 16}
    idx.removed("a", BlockRemoved(0, (b"zz",)), 2.0)
    assert idx.stats.unknown_removals == 1


def test_an_orphan_block_is_counted_not_stored() -> None:
    idx = BlockIndex(PrefixIndex())
    assert idx.stored("a", stored((5,), 4, PROMPT[16:32]), 0.0) == 0
    assert idx.stats.orphans == 1 and not idx.blocks


def test_two_ranks_hold_blocks_apart_and_the_instance_has_their_union() -> None:
    view = PrefixIndex()
    idx = BlockIndex(view)
    idx.stored("a", stored((1,), None, PROMPT[:16], rank=0), 0.0)
    idx.stored("a", stored((1, 2), None, PROMPT[:32], rank=1), 0.0)
    idx.cleared("a", 1, 1.0)  # rank 1 cleared: rank 0 still holds the first block
    assert view.match_by_instance(PROMPT)[1] == {"a": 16}
    idx.removed("a", BlockRemoved(0, (1,)), 2.0)
    assert view.match_by_instance(PROMPT)[1] == {}
    assert idx.bytes == 0 and not idx.blocks


def test_instances_share_block_records() -> None:
    idx = BlockIndex(PrefixIndex())
    idx.stored("a", stored((1,), None, PROMPT[:16]), 0.0)
    idx.stored("b", stored((99,), None, PROMPT[:16]), 0.0)  # another engine, another hash, same tokens
    assert len(idx.blocks) == 1
    assert idx.bytes == BLOCK_BYTES + 16 * TOKEN_BYTES + 2 * HOLDING_BYTES


def test_speculation_lapses_unless_confirmed() -> None:
    view = PrefixIndex()
    idx = BlockIndex(view)
    view.add(PROMPT[:32], "a", 0.0)  # the core adds a routed prompt ...
    idx.speculate("a", PROMPT[:32], 16, None, until=5.0)  # ... and the index takes it as speculative
    assert idx.speculative_blocks("a") == 2
    idx.stored("a", stored((7,), None, PROMPT[:16]), 1.0)  # the engine confirms the first block only
    assert idx.stats.confirmed == 1 and idx.speculative_blocks("a") == 1
    idx.expire(4.9)
    assert view.match_by_instance(PROMPT)[1] == {"a": 32}
    idx.expire(5.0)
    assert idx.stats.expired == 1
    assert view.match_by_instance(PROMPT)[1] == {"a": 16}
    idx.removed("a", BlockRemoved(0, (7,)), 6.0)
    assert view.match_by_instance(PROMPT)[1] == {} and not idx.blocks and idx.bytes == 0


def test_routed_again_refreshes_the_ttl() -> None:
    view = PrefixIndex()
    idx = BlockIndex(view)
    view.add(PROMPT[:16], "a", 0.0)
    idx.speculate("a", PROMPT[:16], 16, None, until=5.0)
    idx.speculate("a", PROMPT[:16], 16, None, until=8.0)
    idx.expire(6.0)
    assert view.match_by_instance(PROMPT)[1] == {"a": 16}
    idx.expire(8.0)
    assert view.match_by_instance(PROMPT)[1] == {}


def test_the_byte_budget_evicts_least_recent_leaves_first() -> None:
    view = PrefixIndex()
    per = BLOCK_BYTES + 16 * TOKEN_BYTES + HOLDING_BYTES
    idx = BlockIndex(view, budget_bytes=3 * per)
    idx.stored("a", stored((1, 2), None, PROMPT[:32]), 0.0)
    idx.stored("a", stored((3,), None, tuple(range(16))), 1.0)
    assert idx.stats.evicted == 0
    idx.stored("a", stored((4,), None, tuple(range(50, 66))), 2.0)  # over budget: the oldest leaf goes
    assert idx.stats.evicted == 1 and idx.bytes <= 3 * per
    assert view.match_by_instance(PROMPT)[1] == {"a": 16}  # block 2 (the leaf) went, block 1 stayed


def test_memory_stays_bounded_under_churn() -> None:
    per = BLOCK_BYTES + 16 * TOKEN_BYTES + HOLDING_BYTES
    idx = BlockIndex(PrefixIndex(), budget_bytes=100 * per)
    for i in range(2000):
        idx.stored("a", stored((i,), None, tuple(range(i * 16, i * 16 + 16))), float(i))
    assert len(idx.blocks) == 100 and idx.bytes <= 100 * per and idx.stats.evicted == 1900


def test_paths_rebuild_the_mirror() -> None:
    idx = BlockIndex(None)
    idx.stored("a", stored((1, 2, 3), None, PROMPT), 0.0)
    idx.speculate("a", tuple(range(16)), 16, None, until=9.0)
    assert sorted(idx.paths("a")) == sorted([PROMPT, tuple(range(16))])
    idx.forget("a")
    assert not idx.blocks and idx.bytes == 0
