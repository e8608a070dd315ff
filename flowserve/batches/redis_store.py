"""The Batch API's state shared by replicas, in the Redis of `gateway.state` (the files'
bytes are in the folder every replica names, `gateway.batches.dir`).

| key | type | what |
|---|---|---|
| `bfile:{id}` | string | a file's record (JSON) |
| `bfiles:{tenant}` | sorted set | a tenant's files by creation time |
| `batch:{id}` | hash | a batch: `doc` (its record, JSON), `status`, `total`, `completed`, `failed` |
| `batches:{tenant}` | sorted set | a tenant's batches by creation time |
| `bopen:{tenant}`, `bopen` | set | open batches: a tenant's, everyone's |
| `bresults:{id}` | hash | line number → its result (JSON) |
| `blease:{id}` | string (TTL) | the replica that runs the batch |

Each step that must not interleave with another replica's is one Lua script: a batch
added under its tenant's limit, results recorded and counted, a status moved only from
the status it was read in, leases taken and renewed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

import orjson
import redis.asyncio as aioredis

from flowserve.batches.records import OPEN, BatchRecord, BatchStatus, FileRecord, LineResult, RequestCounts
from flowserve.replicas.store import StateStore

_ADD = """
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[2], 'doc', ARGV[3], 'status', ARGV[4], 'total', 0, 'completed', 0, 'failed', 0)
redis.call('SADD', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[4], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[2])
return 1
"""
_RECORD = """
local ok, failed = 0, 0
for i = 1, #ARGV, 3 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 2]) == 1 then
    if ARGV[i + 1] == '1' then ok = ok + 1 else failed = failed + 1 end
  end
end
if ok > 0 then redis.call('HINCRBY', KEYS[2], 'completed', ok) end
if failed > 0 then redis.call('HINCRBY', KEYS[2], 'failed', failed) end
return redis.call('HMGET', KEYS[2], 'total', 'completed', 'failed')
"""
_MOVE = """
if redis.call('HGET', KEYS[1], 'status') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'doc', ARGV[3])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'total', ARGV[4]) end
if ARGV[5] == '0' then
  redis.call('SREM', KEYS[2], ARGV[6])
  redis.call('SREM', KEYS[3], ARGV[6])
end
return 1
"""
_CLAIM = """
local mine = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[3] .. id
  local cur = redis.call('GET', key)
  if not cur then
    redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
    table.insert(mine, id)
  elseif cur == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
    table.insert(mine, id)
  end
end
return mine
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""
MOVE_TRIES = 8  # a move raced by another replica's is read again and tried again


class JoinedReplica(Protocol):
    """The replica whose state holds the batches (`flowserve.host.replica.Replica`), once joined."""

    @property
    def store(self) -> StateStore: ...


def _counts(values: Sequence[Any]) -> RequestCounts:
    return RequestCounts(*(int(v or 0) for v in values))


class SharedBatches:
    def __init__(self, replica: JoinedReplica) -> None:
        self._replica = replica

    @property
    def _redis(self) -> aioredis.Redis:
        return self._replica.store.redis

    def _key(self, *parts: str) -> str:
        return self._replica.store.key(*parts)

    # ------------------------------------------------------------------ files

    async def add_file(self, rec: FileRecord) -> None:
        async with self._redis.pipeline(transaction=True) as p:
            p.set(self._key("bfile", rec.id), orjson.dumps(dataclasses.asdict(rec)))
            p.zadd(self._key("bfiles", rec.tenant), {rec.id: rec.created_at})
            await p.execute()

    async def file(self, file_id: str) -> FileRecord | None:
        raw = await self._redis.get(self._key("bfile", file_id))
        return None if raw is None else FileRecord(**orjson.loads(raw))

    async def files(self, tenant: str) -> list[FileRecord]:
        ids = await self._redis.zrevrange(self._key("bfiles", tenant), 0, -1)
        if not ids:
            return []
        raws = await self._redis.mget([self._key("bfile", i.decode()) for i in ids])
        return [FileRecord(**orjson.loads(r)) for r in raws if r is not None]

    # ------------------------------------------------------------------ batches

    async def add_batch(self, rec: BatchRecord, max_open: int) -> bool:
        keys = [self._key("bopen", rec.tenant), self._key("batch", rec.id), self._key("batches", rec.tenant),
                self._key("bopen")]
        added = await self._redis.eval(_ADD, len(keys), *keys, max_open, rec.id, orjson.dumps(rec.to_doc()),
                                       rec.status.value, rec.created_at)
        return bool(added)

    async def batch(self, batch_id: str) -> BatchRecord | None:
        doc, total, completed, failed = await self._redis.hmget(self._key("batch", batch_id),
                                                                ["doc", "total", "completed", "failed"])
        return None if doc is None else BatchRecord.from_doc(orjson.loads(doc), _counts((total, completed, failed)))

    async def _many(self, ids: Sequence[bytes | str]) -> list[BatchRecord]:
        async with self._redis.pipeline(transaction=False) as p:
            for i in ids:
                p.hmget(self._key("batch", i.decode() if isinstance(i, bytes) else i),
                        ["doc", "total", "completed", "failed"])
            rows = await p.execute()
        return [BatchRecord.from_doc(orjson.loads(doc), _counts(rest)) for doc, *rest in rows if doc is not None]

    async def batches(self, tenant: str) -> list[BatchRecord]:
        return await self._many(await self._redis.zrevrange(self._key("batches", tenant), 0, -1))

    async def move(self, batch_id: str, to: BatchStatus, now: int, total: int | None = None,
                   **fields: Any) -> BatchRecord:
        for _ in range(MOVE_TRIES):
            rec = await self.batch(batch_id)
            if rec is None:
                raise KeyError(batch_id)
            new = rec.moved(to, now, **fields)
            keys = [self._key("batch", batch_id), self._key("bopen", rec.tenant), self._key("bopen")]
            if await self._redis.eval(_MOVE, len(keys), *keys, rec.status.value, to.value,
                                      orjson.dumps(new.to_doc()), "" if total is None else total,
                                      int(to in OPEN), batch_id):
                moved = await self.batch(batch_id)
                if moved is None:
                    raise KeyError(batch_id)
                return moved
        raise RuntimeError(f"batch {batch_id}: its status kept changing under {MOVE_TRIES} tries to move it")

    # ------------------------------------------------------------------ results

    async def record(self, batch_id: str, results: Sequence[LineResult]) -> RequestCounts:
        args: list[Any] = []
        for r in results:
            args += [r.line, int(r.ok), orjson.dumps(r.to_doc())]
        keys = [self._key("bresults", batch_id), self._key("batch", batch_id)]
        return _counts(await self._redis.eval(_RECORD, len(keys), *keys, *args))

    async def recorded(self, batch_id: str) -> set[int]:
        return {int(k) for k in await self._redis.hkeys(self._key("bresults", batch_id))}

    async def results(self, batch_id: str) -> list[LineResult]:
        rows = await self._redis.hgetall(self._key("bresults", batch_id))
        return sorted((LineResult.from_doc(orjson.loads(v)) for v in rows.values()), key=lambda r: r.line)

    # ------------------------------------------------------------------ running

    async def claim(self, owner: str, lease_s: float) -> list[BatchRecord]:
        ids = await self._redis.eval(_CLAIM, 1, self._key("bopen"), owner, max(int(lease_s * 1000), 1),
                                     self._key("blease", ""))
        return sorted(await self._many(ids), key=lambda r: (r.created_at, r.id))

    async def release(self, owner: str, batch_id: str) -> None:
        await self._redis.eval(_RELEASE, 1, self._key("blease", batch_id), owner)

    async def aclose(self) -> None:
        return None  # the replica closes its connection
