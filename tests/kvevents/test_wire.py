"""The KV-event wire format: both layouts, and bad input (hypothesis fuzz)."""

from __future__ import annotations

import gc
import tracemalloc

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowserve.cache.block_index import BlockIndex
from flowserve.cache.prefix_index import PrefixIndex
from flowserve.kvevents.wire import MAX_LORA_NAME_BYTES, WireBatch, WireError, decode_batch, encode_batch
from flowserve.types.kv import AllBlocksCleared, BlockRemoved, BlockStored

STORED = BlockStored(0, (11, 12), None, tuple(range(32)), 16, None)
CHILD = BlockStored(0, (b"\x01" * 32,), 12, tuple(range(100, 116)), 16, "adapter-a")
CHANGES = (STORED, CHILD, BlockRemoved(0, (11, b"\x01" * 32)), AllBlocksCleared(0))


@pytest.mark.parametrize("layout", ["array", "map"])
def test_both_layouts_round_trip(layout: str) -> None:
    batch = decode_batch(encode_batch(2.5, CHANGES, layout), rank=0)  # type: ignore[arg-type]
    assert batch == WireBatch(2.5, 0, CHANGES)


def test_vllm_positional_batch_as_msgspec_writes_it() -> None:
    """Older vLLM / SGLang (array_like): tag first, trailing defaults omitted, rank last."""
    payload = msgpack.packb([1.0, [["BlockStored", [7], None, list(range(16)), 16, None],  # no medium (older)
                                   ["BlockRemoved", [7], "GPU"], ["AllBlocksCleared"]], 3], use_bin_type=True)
    batch = decode_batch(payload)
    assert batch.rank == 3
    assert batch.changes == (BlockStored(3, (7,), None, tuple(range(16)), 16), BlockRemoved(3, (7,)),
                             AllBlocksCleared(3))


def test_vllm_keyed_batch_with_extra_fields() -> None:
    """Newer vLLM (maps with `type`): fields it added later (extra_keys, group_idx) are ignored."""
    ev = {"type": "BlockStored", "block_hashes": [b"h" * 32], "parent_block_hash": None,
          "token_ids": list(range(16)), "block_size": 16, "lora_id": 2, "medium": "GPU", "extra_keys": [None],
          "group_idx": 0, "kv_cache_spec_kind": "full_attention"}
    batch = decode_batch(msgpack.packb({"ts": 3, "events": [ev]}, use_bin_type=True), rank=1)
    assert batch.changes == (BlockStored(1, (b"h" * 32,), None, tuple(range(16)), 16, "lora-2"),)


def test_unknown_events_and_other_media_are_skipped_not_broken() -> None:
    payload = msgpack.packb([0.0, [["BlockPinned", [1]], ["BlockStored", [1], None, list(range(16)), 16, None, "CPU"],
                                   {"type": "BlockRemoved", "block_hashes": [2], "medium": "disk"}]])
    batch = decode_batch(payload)
    assert batch.changes == () and batch.broken == ()
    assert len(batch.skipped) == 3 and "BlockPinned" in batch.skipped[0] and "CPU" in batch.skipped[1]


@pytest.mark.parametrize(("event", "says"), [
    (["BlockStored", [1.5], None, list(range(16)), 16, None], "block hash of type float"),
    (["BlockStored", ["abc"], None, list(range(16)), 16, None], "block hash of type str"),
    (["BlockStored", [1], 2.0, list(range(16)), 16, None], "parent_block_hash of type float"),
    (["BlockStored", [1], None, list(range(15)), 16, None], "15 token ids for 1 blocks of 16"),
    (["BlockStored", [1], None, [0.5] * 16, 16, None], "not an array of token ids"),
    (["BlockStored", [1], None, list(range(16)), 0, None], "block_size is 0"),
    (["BlockStored", [1], None], "BlockStored has 2 fields, needs 4"),
    (["BlockRemoved", []], "not a non-empty array"),
    ({"type": "BlockRemoved"}, "BlockRemoved lacks block_hashes"),
    ([1, 2], "tag"),
    ("BlockStored", "an event is an array or a map"),
])
def test_a_broken_event_is_reported_and_the_rest_applies(event: object, says: str) -> None:
    payload = msgpack.packb([0.0, [event, ["AllBlocksCleared"]]], use_bin_type=True)
    batch = decode_batch(payload)
    assert batch.changes == (AllBlocksCleared(0),)
    assert len(batch.broken) == 1 and says in batch.broken[0], batch.broken


def test_a_lora_name_past_the_bound_is_refused_and_nothing_of_it_is_kept() -> None:
    """Issue 44 item 5: 1 MiB adapter names grew the process by as much as was sent (the
    index's cache of adapter keys kept them). Past the bound an event is broken (counted,
    logged) and nothing of its name stays; a name at the bound is an adapter like any."""
    at_bound = "a" * MAX_LORA_NAME_BYTES
    ok = decode_batch(encode_batch(0.0, [BlockStored(0, (1,), None, tuple(range(16)), 16, at_bound)]))
    assert ok.changes[0].lora == at_bound and not ok.broken
    index = BlockIndex(PrefixIndex())
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(16):  # 16 MiB of names sent
            name = f"{i:02d}" + "x" * (1 << 20)
            payload = encode_batch(0.0, [BlockStored(0, (i,), None, tuple(range(16)), 16, name)])
            batch = decode_batch(payload)
            assert batch.changes == () and "lora_name of 1048578 bytes (at most 256)" in batch.broken[0]
            del payload, batch, name
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 1 << 20, kept
    multibyte = "é" * (MAX_LORA_NAME_BYTES // 2 + 1)  # few characters, too many bytes
    assert "lora_name of 258 bytes" in decode_batch(encode_batch(0.0, [BlockStored(0, (1,), None, tuple(range(16)),
                                                                                    16, multibyte)])).broken[0]
    index.stored("a", ok.changes[0], 0.0)  # type: ignore[arg-type]
    assert index.holds("a", tuple(range(16)), 16, at_bound) == 16


@pytest.mark.parametrize(("payload", "says"), [
    (b"\x93\xa1x", "not msgpack"),
    (b"\xc1", "not msgpack"),
    (msgpack.packb([1.0]), "[ts, events, ...]"),
    (msgpack.packb({"ts": 1.0}), "no 'events'"),
    (msgpack.packb("hello"), "an array or a map, not str"),
    (msgpack.packb(["now", []]), "ts is str"),
    (msgpack.packb([1.0, {}]), "events is dict"),
    (msgpack.packb([1.0, [], -1]), "not a rank"),
    (msgpack.packb([1.0, []]) + b"\x00", "not msgpack"),
])
def test_a_payload_that_is_no_batch_raises_wire_error(payload: bytes, says: str) -> None:
    with pytest.raises(WireError, match=None) as e:
        decode_batch(payload)
    assert says in str(e.value)


_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=True),
                  st.text(max_size=12), st.binary(max_size=40))
_values = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(
    st.sampled_from(["type", "ts", "events", "block_hashes", "token_ids", "block_size", "parent_block_hash"])
    | st.text(max_size=6), inner, max_size=6), max_leaves=30)
_tags = st.sampled_from(["BlockStored", "BlockRemoved", "AllBlocksCleared", "Other"])
_events = st.one_of(_values, st.builds(lambda t, rest: [t, *rest], _tags, st.lists(_values, max_size=8)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=200),
                 st.builds(lambda ts, evs, rest: msgpack.packb([ts, evs, *rest]), _leaf, st.lists(_events, max_size=5),
                           st.lists(_leaf, max_size=2)),
                 st.builds(lambda d: msgpack.packb(d), _values)))
def test_fuzz_decode_raises_only_wire_error(payload: bytes) -> None:
    """Whatever arrives: a batch (whose changes are well-formed), or WireError — nothing else."""
    try:
        batch = decode_batch(payload)
    except WireError:
        return
    for c in batch.changes:
        if isinstance(c, BlockStored):
            assert len(c.token_ids) == len(c.block_hashes) * c.block_size and c.block_size > 0
            assert all(isinstance(h, int | bytes) and not isinstance(h, bool) for h in c.block_hashes)
        else:
            assert isinstance(c, BlockRemoved | AllBlocksCleared)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.builds(BlockStored, st.just(0), st.lists(st.integers(0, 2**63) | st.binary(min_size=1, max_size=32),
                                                              min_size=1, max_size=3).map(tuple),
                          st.none() | st.integers(0, 2**63), st.just(()), st.just(4)).map(
    lambda b: BlockStored(0, b.block_hashes, b.parent_hash, tuple(range(4 * len(b.block_hashes))), 4)),
    max_size=4), st.sampled_from(["array", "map"]))
def test_fuzz_round_trip(changes: list[BlockStored], layout: str) -> None:
    assert decode_batch(encode_batch(1.0, changes, layout)).changes == tuple(changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(("kv", "says"), [
    ({"endpoint": "tcp://*:5557"}, "that is where the engine binds; write the engine's address"),
    ({"endpoint": "http://127.0.0.1:5557"}, "write tcp://HOST:PORT"),
    ({"endpoint": "tcp://127.0.0.1:5557", "replay": "tcp://0.0.0.0:5558"}, "replay 'tcp://0.0.0.0:5558'"),
    ({"replay": "tcp://127.0.0.1:5558"}, "kv_events needs the engine's `endpoint`"),
    ({"endpoint": "tcp://127.0.0.1:5557", "data_parallel_size": 0}, "data_parallel_size"),
    ({"endpoint": "tcp://127.0.0.1:5557", "bogus": 1}, "bogus"),
])
def test_kv_events_config_errors_are_clear(kv: dict, says: str) -> None:
    from flowserve.config import ClusterConfig
    from flowserve.errors import ConfigError
    from flowserve.schema import validate

    inst = {"name": "v", "gpu": "A100-80G", "model": "llama-3.1-8b", "backend": "openai",
            "url": "http://127.0.0.1:8000", "kv_events": kv}
    with pytest.raises(ConfigError) as e:
        validate(ClusterConfig, {"instances": [inst]}, "c.yaml").specs()
    assert says in str(e.value)


def test_kv_events_config_builds_the_spec() -> None:
    from flowserve.config import ClusterConfig
    from flowserve.errors import ConfigError
    from flowserve.schema import validate
    from flowserve.types.kv import KVEventsSpec

    def inst(name: str, port: int, **kw: object) -> dict:
        return {"name": name, "gpu": "A100-80G", "model": "llama-3.1-8b", "backend": "openai", "block_size": 32,
                "url": "http://127.0.0.1:8000", "kv_events": {"endpoint": f"tcp://10.0.0.5:{port}", **kw}}
    specs = validate(ClusterConfig, {"instances": [inst("v", 5557, replay="tcp://10.0.0.5:5558", topic="kv")]},
                     "c.yaml").specs()
    assert specs[0].kv_events == KVEventsSpec("tcp://10.0.0.5:5557", "tcp://10.0.0.5:5558", "kv", 32, 1)
    with pytest.raises(ConfigError, match="share the kv_events endpoints"):
        validate(ClusterConfig, {"instances": [inst("v", 5557), inst("w", 5557)]}, "c.yaml").specs()
    sim = validate(ClusterConfig, {"instances": [{"name": "s", "gpu": "A100-80G", "model": "llama-3.1-8b",
                                                  "kv_events": {}}]}, "c.yaml").specs()
    assert sim[0].kv_events == KVEventsSpec("", None, "", 16, 1)
