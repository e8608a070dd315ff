"""The bytes replicas keep in Redis, and their strict parsers.

Anything read back is checked before it reaches a core: a foreign key, a value of the
wrong type or shape, a number out of range, a block whose tokens do not hash to its name
— each raises `StateError` with what was wrong, and the sync refuses that piece of state
(logged) and keeps serving. Every parser here is fuzzed (tests/replicas/test_codec.py).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Any

import orjson

from flowserve.replicas.blocks import BLOCK, MAX_ENTRY_BLOCKS, RouteEntry
from flowserve.replicas.peers import MAX_TENANTS, Report
from flowserve.types.peers import InstanceLoad, TenantCost

VERSION = 1
MAX_NAME = 256  # instance, tenant, replica and program names
MAX_INSTANCES = 1024
MAX_TOKEN = 2**31 - 1
_HASH = struct.Struct(">q")
_BLOCK_HEAD = struct.Struct(">IH")


class StateError(ValueError):
    """Shared state this replica refuses: it names what was wrong."""


def name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME:
        raise StateError(f"{what}: expected a name of 1 to {MAX_NAME} characters, got {_show(value)}")
    return value


def count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
        raise StateError(f"{what}: expected a count, got {_show(value)}")
    return value


def amount(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (math.isfinite(value) and value >= 0):
        raise StateError(f"{what}: expected a finite number ≥ 0, got {_show(value)}")
    return float(value)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def json_object(raw: bytes | str | None, what: str) -> dict[str, Any]:
    if raw is None:
        raise StateError(f"{what}: missing")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise StateError(f"{what}: not JSON") from None
    if not isinstance(data, dict):
        raise StateError(f"{what}: expected a JSON object")
    return data


# ---------------------------------------------------------------------- reports

def encode_report(r: Report) -> bytes:
    return orjson.dumps({"v": VERSION, "replica": r.replica, "t": r.time,
                         "loads": [[x.instance, x.running, x.queued, x.outstanding_s] for x in r.loads],
                         "tenants": {t.tenant: t.cost for t in r.tenants}, "epoch": r.epoch, "pending": r.pending})


def parse_report(raw: bytes | str | None, replica: str) -> Report:
    """A peer's heartbeat report (it must name the replica whose key holds it)."""
    what = f"report of replica {replica!r}"
    d = json_object(raw, what)
    if d.get("v") != VERSION:
        raise StateError(f"{what}: version {_show(d.get('v'))}, expected {VERSION}")
    if d.get("replica") != replica:
        raise StateError(f"{what}: names replica {_show(d.get('replica'))}")
    time = amount(d.get("t"), f"{what}: t")
    rows, tenants = d.get("loads"), d.get("tenants")
    if not isinstance(rows, list) or len(rows) > MAX_INSTANCES:
        raise StateError(f"{what}: loads: expected a list of at most {MAX_INSTANCES}")
    loads = []
    for row in rows:
        if not isinstance(row, list) or len(row) != 4:
            raise StateError(f"{what}: loads: expected [instance, running, queued, seconds], got {_show(row)}")
        loads.append(InstanceLoad(name(row[0], f"{what}: instance"), count(row[1], f"{what}: running"),
                                  count(row[2], f"{what}: queued"), amount(row[3], f"{what}: seconds")))
    if not isinstance(tenants, dict) or len(tenants) > MAX_TENANTS:
        raise StateError(f"{what}: tenants: expected an object of at most {MAX_TENANTS}")
    costs = tuple(TenantCost(name(t, f"{what}: tenant"), amount(c, f"{what}: cost of {t!r}"))
                  for t, c in tenants.items())
    return Report(replica, time, tuple(loads), costs, count(d.get("epoch", 0), f"{what}: epoch"),
                  count(d.get("pending", 0), f"{what}: pending"))


# ---------------------------------------------------------------------- routed prompts

def encode_route(e: RouteEntry) -> dict[bytes, bytes]:
    """A stream entry's fields."""
    blocks = b"".join(_BLOCK_HEAD.pack(i, len(toks)) + struct.pack(f">{len(toks)}I", *toks) for i, toks in e.blocks)
    return {b"r": e.replica.encode(), b"i": e.instance.encode(), b"t": repr(e.time).encode(),
            b"h": b"".join(_HASH.pack(h) for h in e.hashes), b"b": blocks}


def parse_route(fields: Mapping[bytes, bytes]) -> RouteEntry:
    """A stream entry (RouteDecoder then checks each carried block against its hash)."""
    try:
        replica, instance = fields[b"r"].decode(), fields[b"i"].decode()
        time, hashes, blocks = float(fields[b"t"]), fields[b"h"], fields[b"b"]
    except (KeyError, UnicodeDecodeError, ValueError, TypeError, AttributeError):
        raise StateError("routed prompt: expected fields r, i, t, h, b") from None
    name(replica, "routed prompt: replica")
    name(instance, "routed prompt: instance")
    amount(time, "routed prompt: t")
    if not isinstance(hashes, bytes) or not isinstance(blocks, bytes):
        raise StateError("routed prompt: h and b must be bytes")
    n = len(hashes) // _HASH.size
    if len(hashes) % _HASH.size or not 0 < n <= MAX_ENTRY_BLOCKS:
        raise StateError(f"routed prompt: h must hold 1 to {MAX_ENTRY_BLOCKS} 8-byte hashes")
    names = tuple(h for (h,) in _HASH.iter_unpack(hashes))
    carried: list[tuple[int, tuple[int, ...]]] = []
    at = 0
    while at < len(blocks):
        if at + _BLOCK_HEAD.size > len(blocks):
            raise StateError("routed prompt: a block is cut short")
        index, size = _BLOCK_HEAD.unpack_from(blocks, at)
        at += _BLOCK_HEAD.size
        full = index < n - 1
        if index >= n or (carried and index <= carried[-1][0]) or not 0 < size <= BLOCK or (full and size != BLOCK):
            raise StateError(f"routed prompt: block {index} of {size} tokens does not fit {n} hashes")
        if at + 4 * size > len(blocks):
            raise StateError("routed prompt: a block is cut short")
        toks = struct.unpack_from(f">{size}I", blocks, at)
        at += 4 * size
        if max(toks) > MAX_TOKEN:
            raise StateError("routed prompt: a token id beyond 2^31 − 1")
        carried.append((index, toks))
    return RouteEntry(replica, instance, time, names, tuple(carried))
