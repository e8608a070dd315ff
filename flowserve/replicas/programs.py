"""The shared program registry: one Redis hash per open program, so a program's calls may
land on any replica and still form one program with one exact summary.

Fields: the program's settings from its first call (`tenant`, `priority`, `cls`,
`slo_ms`, `opened` wall time, `owner` replica), `ended` (empty while open, else how it
ended) and `ended_at`; per replica that served part of it, `c:{replica}` (calls it
started) and `p:{replica}` (its totals: answered, failed, prompt, cached and output
tokens, engine seconds, the wall time of its latest call); `i:{instance}` and
`t:{thread}` for the instances and threads used. A part's calls in flight are its calls
started less those answered or failed. Every replica writes only its own
fields, and always its totals: a write repeated after Redis came back counts nothing
twice, and a replica's part stays when it dies (its calls then in flight are the
program's lost calls). A tenant's open programs are a set (`open:{tenant}`), so the
per-tenant limit holds across replicas; opening, counting a call against
`programs.max_calls` and ending are Lua scripts, atomic in Redis.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import orjson

from flowserve.replicas.codec import MAX_NAME, StateError, amount, count, name
from flowserve.replicas.store import StateStore

_OPEN = """
if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists', redis.call('HGETALL', KEYS[1])} end
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[7]) then
  for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    local ended = redis.call('HGET', ARGV[9] .. id, 'ended')
    if not ended or ended ~= '' then redis.call('SREM', KEYS[2], id) end
  end
  local n = redis.call('SCARD', KEYS[2])
  if n >= tonumber(ARGV[7]) then return {'limit', n} end
end
redis.call('HSET', KEYS[1], 'tenant', ARGV[1], 'priority', ARGV[2], 'cls', ARGV[3], 'slo_ms', ARGV[4],
           'opened', ARGV[5], 'owner', ARGV[6], 'ended', '')
redis.call('PEXPIRE', KEYS[1], ARGV[8])
redis.call('SADD', KEYS[2], ARGV[10])
return {'created', redis.call('HGETALL', KEYS[1])}
"""

_CALL = """
local ended = redis.call('HGET', KEYS[1], 'ended')
if not ended then return {'gone'} end
if ended ~= '' then return {'ended', redis.call('HGETALL', KEYS[1])} end
local others = 0
local flat = redis.call('HGETALL', KEYS[1])
for i = 1, #flat, 2 do
  if string.sub(flat[i], 1, 2) == 'c:' and flat[i] ~= 'c:' .. ARGV[1] then
    others = others + (tonumber(flat[i + 1]) or 0)
  end
end
if others + tonumber(ARGV[2]) > tonumber(ARGV[3]) then return {'limit', others + tonumber(ARGV[2]) - 1} end
redis.call('HSET', KEYS[1], 'c:' .. ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'ok', redis.call('HGETALL', KEYS[1])}
"""

_RECORD = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
"""

_END = """
local ended = redis.call('HGET', KEYS[1], 'ended')
if not ended then return {'gone'} end
if ended == '' then
  redis.call('HSET', KEYS[1], 'ended', ARGV[1], 'ended_at', ARGV[2])
  redis.call('SREM', KEYS[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {'ended', redis.call('HGETALL', KEYS[1])}
end
return {'already', redis.call('HGETALL', KEYS[1])}
"""


@dataclass(frozen=True, slots=True)
class Part:
    """One replica's totals for a program."""

    calls: int = 0  # started
    done: int = 0
    failed: int = 0
    prompt: int = 0
    cached: int = 0
    output: int = 0
    service_s: float = 0.0
    last: float = 0.0  # wall time of its latest call's start or end (0: none yet)

    @property
    def inflight(self) -> int:
        return max(self.calls - self.done - self.failed, 0)

    def encode(self) -> bytes:
        return orjson.dumps([self.done, self.failed, self.prompt, self.cached, self.output, self.service_s,
                             self.last])


@dataclass(frozen=True, slots=True)
class ProgramRecord:
    id: str
    tenant: str
    priority: int
    cls: str
    slo_ms: float | None
    opened: float  # wall time of its first call
    owner: str
    ended: str | None
    ended_at: float | None
    parts: Mapping[str, Part] = field(default_factory=dict)
    instances: tuple[str, ...] = ()
    threads: tuple[str, ...] = ()

    @property
    def calls(self) -> int:
        return sum(p.calls for p in self.parts.values())

    def service_s(self, without: str | None = None) -> float:
        return sum(p.service_s for r, p in self.parts.items() if r != without)

    def last(self) -> float:
        return max((p.last for p in self.parts.values()), default=0.0)


def parse_program(program_id: str, flat: Mapping[bytes, bytes]) -> ProgramRecord:
    """A registry hash (HGETALL) → its record; StateError naming the field that is wrong."""
    what = f"program {program_id!r}"
    try:
        d = {k.decode(): v.decode() for k, v in flat.items()}
    except (UnicodeDecodeError, AttributeError):
        raise StateError(f"{what}: not text") from None

    def num(key: str) -> float:
        try:
            return amount(float(d[key]), f"{what}: {key}")
        except (KeyError, ValueError):
            raise StateError(f"{what}: {key}: missing or not a number") from None

    if "tenant" not in d or "ended" not in d:
        raise StateError(f"{what}: not a program record (no tenant or ended field)")
    calls: dict[str, int] = {}
    totals: dict[str, Part] = {}
    for key, value in d.items():
        if key.startswith("c:"):
            try:
                calls[name(key[2:], f"{what}: replica")] = count(int(value), f"{what}: {key}")
            except ValueError:
                raise StateError(f"{what}: {key}: not a count") from None
        elif key.startswith("p:"):
            try:
                row = orjson.loads(value)
            except orjson.JSONDecodeError:
                row = None
            if not isinstance(row, list) or len(row) != 7:
                raise StateError(f"{what}: {key}: expected 7 totals")
            ints = [count(x, f"{what}: {key}") for x in row[:5]]
            totals[name(key[2:], f"{what}: replica")] = Part(0, *ints, amount(row[5], f"{what}: {key}"),
                                                            amount(row[6], f"{what}: {key}"))
    parts = {r: replace(totals.get(r, Part()), calls=calls.get(r, 0)) for r in calls.keys() | totals.keys()}
    slo = d.get("slo_ms", "")
    try:
        priority = int(d.get("priority", "0"))
    except ValueError:
        raise StateError(f"{what}: priority: not an integer") from None
    if d.get("cls", "interactive") not in ("interactive", "batch"):
        raise StateError(f"{what}: cls: not a query class")
    return ProgramRecord(program_id, name(d["tenant"], f"{what}: tenant"), priority, d.get("cls", "interactive"),
                         num("slo_ms") if slo else None, num("opened"), d.get("owner", "")[:MAX_NAME],
                         d["ended"] or None, num("ended_at") if d.get("ended_at") else None, parts,
                         tuple(sorted(k[2:] for k in d if k.startswith("i:"))),
                         tuple(sorted(k[2:] for k in d if k.startswith("t:"))))


def _pairs(flat: list[bytes]) -> dict[bytes, bytes]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


class ProgramRegistry:
    """The registry's commands; each answer is parsed (StateError for foreign contents)."""

    def __init__(self, store: StateStore, replica: str, ttl_s: float) -> None:
        self.store = store
        self.replica = replica
        self.ttl_ms = max(int(ttl_s * 1000), 1000)

    def _prefix(self, tenant: str) -> str:
        """Program ids are the tenant's own (two tenants may both use "job-1"); the
        tenant's length first, so a tenant with a colon cannot reach another's keys."""
        return self.store.key("program", f"{len(tenant)}.{tenant}", "")

    def _key(self, tenant: str, program_id: str) -> str:
        return self._prefix(tenant) + program_id

    async def open(self, program_id: str, tenant: str, priority: int, cls: str, slo_ms: float | None,
                   opened: float, max_open: int) -> tuple[str, ProgramRecord | int]:
        """("created" | "exists", record), or ("limit", the tenant's open programs)."""
        got = await self.store.redis.eval(
            _OPEN, 2, self._key(tenant, program_id), self.store.key("open", tenant), tenant, priority, cls,
            "" if slo_ms is None else repr(slo_ms), repr(opened), self.replica, max_open, self.ttl_ms,
            self._prefix(tenant), program_id)
        how = _status(got)
        if how == "limit":
            return how, int(got[1])
        return how, parse_program(program_id, _pairs(got[1]))

    async def count_call(self, tenant: str, program_id: str, calls: int, max_calls: int
                         ) -> tuple[str, ProgramRecord | int | None]:
        """Count this replica's `calls`-th call: ("ok", record), ("ended", record),
        ("limit", calls so far) or ("gone", None)."""
        got = await self.store.redis.eval(_CALL, 1, self._key(tenant, program_id), self.replica, calls, max_calls,
                                          self.ttl_ms)
        how = _status(got)
        if how == "gone":
            return how, None
        if how == "limit":
            return how, int(got[1])
        return how, parse_program(program_id, _pairs(got[1]))

    async def record(self, tenant: str, program_id: str, part: Part, instances: set[str], threads: set[str]) -> bool:
        """Write this replica's totals; False when the program is gone from the state."""
        args: list[bytes | str] = [f"p:{self.replica}", part.encode(), f"c:{self.replica}", str(part.calls)]
        for i in sorted(instances):
            args += [f"i:{i}", b"1"]
        for t in sorted(threads):
            args += [f"t:{t}", b"1"]
        return bool(await self.store.redis.eval(_RECORD, 1, self._key(tenant, program_id), self.ttl_ms, *args))

    async def end(self, program_id: str, tenant: str, how: str, at: float) -> tuple[str, ProgramRecord | None]:
        """("ended" | "already", record) or ("gone", None)."""
        got = await self.store.redis.eval(_END, 2, self._key(tenant, program_id), self.store.key("open", tenant), how,
                                          repr(at), self.ttl_ms, program_id)
        status = _status(got)
        return status, None if status == "gone" else parse_program(program_id, _pairs(got[1]))

    async def read(self, tenant: str, program_id: str) -> ProgramRecord | None:
        flat = await self.store.redis.hgetall(self._key(tenant, program_id))
        return parse_program(program_id, flat) if flat else None


def _status(got: object) -> str:
    if not isinstance(got, list) or not got or not isinstance(got[0], bytes):
        raise StateError(f"unexpected answer from a registry script: {got!r:.60}")
    return got[0].decode()
