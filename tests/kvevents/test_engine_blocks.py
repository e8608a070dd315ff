"""A simulated engine's cache published in blocks, as vLLM publishes them."""

from __future__ import annotations

from flowserve.kvevents.engine_blocks import EngineBlocks, engine_hashes
from flowserve.types.kv import BlockRemoved, BlockStored, KVCacheEvents, KVViewChanged


def test_engine_blocks_publish_whole_blocks_as_vllm_does() -> None:
    eb = EngineBlocks("a", 4)
    first = eb.announce(0.0)
    assert first == [KVViewChanged(0.0, "a", True, "followed from seq 0")]
    eb.stored(tuple(range(10)))  # two full blocks; the partial third is not stored
    eb.stored(tuple(range(8)) + (50, 51, 52, 53))  # shares the first two blocks: one new
    (ev,) = eb.flush(1.0)
    h = engine_hashes(tuple(range(8)) + (50, 51, 52, 53), 4, 3)
    assert isinstance(ev, KVCacheEvents) and ev.changes == (
        BlockStored(0, tuple(h[:2]), None, tuple(range(8)), 4), BlockStored(0, (h[2],), h[1], (50, 51, 52, 53), 4))
    eb.evicted(tuple(range(8)) + (50, 51, 52, 53), 9)  # tokens 9.. dropped: the third block is gone
    assert eb.flush(2.0)[0].changes == (BlockRemoved(0, (h[2],)),)
    assert eb.flush(3.0) == []
