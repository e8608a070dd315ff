"""The engines' KV-event wire format: msgpack `EventBatch`es, in both layouts seen in the wild.

vLLM (`vllm/distributed/kv_events.py`) and SGLang encode with msgspec structs, tagged by
class name. Older vLLM and SGLang declare them `array_like`: a batch is `[ts, events,
data_parallel_rank?]` and an event a positional array with its tag first,
`["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
lora_name?, ...]`, `["BlockRemoved", block_hashes, medium, ...]`, `["AllBlocksCleared"]`.
Newer vLLM encodes maps: `{"ts", "events", "data_parallel_rank"?}` and events with a
`type` key and named fields. Trailing fields with defaults may be omitted (msgspec's
`omit_defaults`); unknown trailing fields are ignored.

`decode_batch` never raises on bad input other than `WireError` (the whole payload is
unusable); a bad event inside a good batch is reported in the batch (`broken`: a known
event that cannot be applied, so the view is incomplete; `skipped`: an event flowserve
does not use — an unknown tag, a non-GPU medium). `encode_batch` writes either layout:
the simulated engines and the tests publish through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgpack

from flowserve.types.kv import AllBlocksCleared, BlockHash, BlockRemoved, BlockStored, CacheChange

Layout = Literal["array", "map"]
GPU_MEDIA = (None, "GPU", "gpu")  # blocks in the engine's GPU cache; CPU/disk tiers are not routed on
MAX_HASH_BYTES = 64  # vLLM's sha256 digests are 32 bytes; anything longer is not a block hash
# an adapter's name as vLLM's --lora-modules gives it (a short id): a longer one is refused, so a
# publisher cannot make the index keep megabytes per event
MAX_LORA_NAME_BYTES = 256


class WireError(ValueError):
    """A payload that is not an EventBatch at all (the reason says what is wrong)."""


@dataclass(frozen=True, slots=True)
class WireBatch:
    ts: float
    rank: int
    changes: tuple[CacheChange, ...]
    broken: tuple[str, ...] = ()  # known events that could not be read (the view misses them)
    skipped: tuple[str, ...] = ()  # events flowserve does not use (unknown tags, other media)


# ---------------------------------------------------------------------------- decoding


def decode_batch(payload: bytes, rank: int = 0) -> WireBatch:
    """One EventBatch; `rank` is the data-parallel rank of the socket it came from (a
    batch that names its own `data_parallel_rank` overrides it)."""
    try:
        obj = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several types (ExtraData, FormatError, StackError, ValueError, ...)
        raise WireError(f"not msgpack: {type(e).__name__}: {e}") from None
    if isinstance(obj, list):
        if len(obj) < 2:
            raise WireError(f"a positional EventBatch has [ts, events, ...]; got {len(obj)} fields")
        ts, events, batch_rank = obj[0], obj[1], (obj[2] if len(obj) > 2 else None)
    elif isinstance(obj, dict):
        if "events" not in obj:
            raise WireError("an EventBatch map has no 'events'")
        ts, events, batch_rank = obj.get("ts", 0.0), obj["events"], obj.get("data_parallel_rank")
    else:
        raise WireError(f"an EventBatch is an array or a map, not {type(obj).__name__}")
    if not _is_number(ts):
        raise WireError(f"ts is {type(ts).__name__}, not a number")
    if not isinstance(events, list):
        raise WireError(f"events is {type(events).__name__}, not an array")
    if batch_rank is not None:
        if not _is_int(batch_rank) or batch_rank < 0:
            raise WireError(f"data_parallel_rank is {batch_rank!r}, not a rank")
        rank = batch_rank
    changes: list[CacheChange] = []
    broken: list[str] = []
    skipped: list[str] = []
    for i, ev in enumerate(events):
        try:
            change = _event(ev, rank)
        except _Skip as s:
            skipped.append(f"event {i}: {s}")
        except ValueError as e:
            broken.append(f"event {i}: {e}")
        else:
            changes.append(change)
    return WireBatch(float(ts), rank, tuple(changes), tuple(broken), tuple(skipped))


class _Skip(Exception):
    """An event flowserve does not route on."""


_STORED = ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name")
_REMOVED = ("block_hashes", "medium")


def _tag(ev: Any) -> str:
    if isinstance(ev, list):
        tag = ev[0] if ev else None
    elif isinstance(ev, dict):
        tag = ev.get("type")
    else:
        raise ValueError(f"an event is an array or a map, not {type(ev).__name__}")
    if not isinstance(tag, str):
        raise ValueError("an event's tag (first item, or 'type') is not a string")
    return tag


def _fields(ev: list[Any] | dict[str, Any], tag: str, names: tuple[str, ...], required: int) -> dict[str, Any]:
    """A positional or keyed event's fields by name; the first `required` must be there."""
    if isinstance(ev, list):
        if len(ev) - 1 < required:
            raise ValueError(f"{tag} has {len(ev) - 1} fields, needs {required}")
        return dict(zip(names, ev[1:], strict=False))
    missing = [n for n in names[:required] if n not in ev]
    if missing:
        raise ValueError(f"{tag} lacks {', '.join(missing)}")
    return ev


def _event(ev: Any, rank: int) -> CacheChange:
    tag = _tag(ev)
    if tag == "BlockStored":
        f = _fields(ev, tag, _STORED, 4)
        _medium(f.get("medium"))
        hashes = _hashes(f["block_hashes"])
        parent = f["parent_block_hash"]
        if parent is not None:
            parent = _hash(parent, "parent_block_hash")
        size = f["block_size"]
        if not _is_int(size) or size <= 0:
            raise ValueError(f"block_size is {str(size)[:20]}")
        tokens = f["token_ids"]
        if not isinstance(tokens, list) or not all(_is_int(t) for t in tokens):
            raise ValueError("token_ids is not an array of token ids")
        if len(tokens) != len(hashes) * size:
            raise ValueError(f"{len(tokens)} token ids for {len(hashes)} blocks of {size}")
        return BlockStored(rank, hashes, parent, tuple(tokens), size, _lora(f.get("lora_name"), f.get("lora_id")))
    if tag == "BlockRemoved":
        f = _fields(ev, tag, _REMOVED, 1)
        _medium(f.get("medium"))
        return BlockRemoved(rank, _hashes(f["block_hashes"]))
    if tag == "AllBlocksCleared":
        return AllBlocksCleared(rank)
    raise _Skip(f"unknown event {tag[:40]!r}")


def _medium(medium: Any) -> None:
    if medium not in GPU_MEDIA:
        raise _Skip(f"blocks on medium {str(medium)[:20]!r}")


def _hashes(value: Any) -> tuple[BlockHash, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError("block_hashes is not a non-empty array")
    return tuple(_hash(h, "block hash") for h in value)


def _hash(h: Any, what: str) -> BlockHash:
    if _is_int(h):
        return h
    if isinstance(h, bytes) and 0 < len(h) <= MAX_HASH_BYTES:
        return h
    raise ValueError(f"{what} of type {type(h).__name__} (an integer or a digest is expected)")


def _lora(name: Any, lora_id: Any) -> str | None:
    if isinstance(name, str) and name:
        if len(name) > MAX_LORA_NAME_BYTES or len(name.encode()) > MAX_LORA_NAME_BYTES:
            raise ValueError(f"lora_name of {len(name.encode())} bytes (at most {MAX_LORA_NAME_BYTES})")
        return name
    if _is_int(lora_id):
        return f"lora-{lora_id}"  # older engines name adapters by id only
    return None


def _is_int(x: Any) -> bool:
    return type(x) is int


def _is_number(x: Any) -> bool:
    return type(x) in (int, float)


# ---------------------------------------------------------------------------- encoding


def encode_batch(ts: float, changes: Sequence[CacheChange], layout: Layout = "array",
                 rank: int | None = None) -> bytes:
    """An EventBatch as vLLM writes it: positional (`array`, msgspec's array_like) or keyed
    (`map`); `rank` is written as `data_parallel_rank` when given."""
    if layout == "array":
        events: list[Any] = [_array(c) for c in changes]
        batch: Any = [ts, events] if rank is None else [ts, events, rank]
    else:
        events = [_map(c) for c in changes]
        batch = {"ts": ts, "events": events}
        if rank is not None:
            batch["data_parallel_rank"] = rank
    return msgpack.packb(batch, use_bin_type=True)


def _array(c: CacheChange) -> list[Any]:
    if isinstance(c, BlockStored):
        return ["BlockStored", list(c.block_hashes), c.parent_hash, list(c.token_ids), c.block_size, None, "GPU",
                c.lora]
    if isinstance(c, BlockRemoved):
        return ["BlockRemoved", list(c.block_hashes), "GPU"]
    return ["AllBlocksCleared"]


def _map(c: CacheChange) -> dict[str, Any]:
    if isinstance(c, BlockStored):
        return {"type": "BlockStored", "block_hashes": list(c.block_hashes), "parent_block_hash": c.parent_hash,
                "token_ids": list(c.token_ids), "block_size": c.block_size, "lora_id": None, "medium": "GPU",
                "lora_name": c.lora}
    if isinstance(c, BlockRemoved):
        return {"type": "BlockRemoved", "block_hashes": list(c.block_hashes), "medium": "GPU"}
    return {"type": "AllBlocksCleared"}
