"""The replicas' shared state in Redis: keys, and the few commands each part uses.

Every key lives under `{namespace}:` so several flowserve deployments (or other tenants
of the same Redis) can share one server:

| key | type | what |
|---|---|---|
| `seq` | string | counter: each replica's number (ids unique across replicas) |
| `config` | string (TTL) | the serving config's fingerprint and description, refreshed by heartbeats |
| `replicas` | set | replica names that reported lately |
| `report:{replica}` | string (TTL 2 heartbeats) | its load, tenants' service, epoch seen, parts unwritten |
| `epoch` | string | counter: bumped when a program ends (its summary waits for reports after it) |
| `routes` | stream (bounded) | routed prompts (chained block hashes) |
| `program:{id}` | hash | the program registry (`flowserve.replicas.programs`) |
| `open:{tenant}` | set | a tenant's open programs |
| `query:{id}` | string (TTL) | a finished query's answer |
| `instances` | hash | the admin API's instance changes: name → the instance as sent (empty: removed) |
| `instances:version` | string | counter: bumped with each change (replicas re-read the hash when it moves) |

Commands run with a short timeout and no client-side retries: the sync loop decides
what a failure means (the replica serves on its local view, degraded).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from flowserve.errors import ConfigError
from flowserve.replicas.codec import StateError

# what a lost or broken Redis raises: serve on, degraded
LOST = (aioredis.ConnectionError, aioredis.TimeoutError, OSError)

_NUMBER = """
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if cur == nil then return 0 end
if cur < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
"""

_INSTANCE = """
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return redis.call('INCR', KEYS[2])
"""

_CONFIG = """
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return cur end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"""


def connect(url: str, timeout_s: float) -> aioredis.Redis:
    """A client for `url` (redis://, rediss:// or unix://); ConfigError for a URL it cannot use."""
    if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(f"gateway.state.url {url!r}: expected redis://HOST:PORT/DB, rediss://... or "
                          f"unix:///PATH?db=N")
    try:
        return aioredis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                       retry=Retry(NoBackoff(), 0), retry_on_error=[], decode_responses=False)
    except ValueError as e:
        raise ConfigError(f"gateway.state.url {url!r}: {e}") from None


class StateStore:
    def __init__(self, client: aioredis.Redis, namespace: str) -> None:
        self.redis = client
        self.ns = namespace

    def key(self, *parts: str | int) -> str:
        return ":".join((self.ns, *map(str, parts)))

    async def aclose(self) -> None:
        await self.redis.aclose()

    async def ping(self) -> None:
        await self.redis.ping()

    # ------------------------------------------------------------------ replicas

    async def _counter(self, name: str) -> int:
        """INCR of a counter key; StateError when a foreign value sits there (left as it is)."""
        try:
            n = await self.redis.incr(self.key(name))
        except aioredis.ResponseError as e:  # not an integer, or not a string
            raise StateError(f"{self.key(name)} is not a flowserve counter ({e})") from None
        if not isinstance(n, int) or n < 1:
            raise StateError(f"{self.key(name)} is not a flowserve counter (it counted to {n!r})")
        return n

    async def claim_number(self) -> int:
        """A number no other replica of this state had: ids unique across replicas
        (StateError: a foreign value holds the counter)."""
        return await self._counter("seq")

    async def keep_number(self, number: int) -> None:
        """After Redis lost its data: numbers up to ours stay taken (a foreign value under
        the counter is left alone: StateError)."""
        try:
            kept = await self.redis.eval(_NUMBER, 1, self.key("seq"), number)
        except aioredis.ResponseError as e:
            raise StateError(f"{self.key('seq')} is not a flowserve counter ({e})") from None
        if kept != 1:
            raise StateError(f"{self.key('seq')} is not a flowserve counter (it holds a foreign value)")

    async def hold_config(self, fingerprint: bytes, ttl_s: float) -> bytes | None:
        """Claim (or refresh) the config of this state; another fingerprint held there is
        returned (None: ours holds)."""
        other = await self.redis.eval(_CONFIG, 1, self.key("config"), fingerprint, int(ttl_s * 1000))
        return other if isinstance(other, bytes) else None

    async def write_report(self, replica: str, raw: bytes, ttl_s: float) -> None:
        async with self.redis.pipeline(transaction=False) as p:
            p.set(self.key("report", replica), raw, px=max(int(ttl_s * 1000), 1))
            p.sadd(self.key("replicas"), replica)
            await p.execute()

    async def read_reports(self) -> tuple[dict[str, bytes | None], int | None]:
        """Every listed replica's report (None: expired, or not a string), and the epoch
        (None: a foreign value holds it)."""
        names = sorted(n.decode(errors="replace") for n in await self.redis.smembers(self.key("replicas")))
        keys = [self.key("report", n) for n in names]
        *raws, epoch = await self.redis.mget([*keys, self.key("epoch")])  # nil for a foreign type too
        try:
            e: int | None = int(epoch or 0)
        except ValueError:
            e = None
        return dict(zip(names, raws, strict=True)), e

    async def bump_epoch(self) -> int:
        """A new epoch: reports made after it say what their senders wrote before it
        (StateError: a foreign value holds the counter)."""
        return await self._counter("epoch")

    async def drop_replicas(self, names: Sequence[str]) -> None:
        if names:
            await self.redis.srem(self.key("replicas"), *names)

    # ------------------------------------------------------------------ instance changes

    async def put_instance(self, name: str, raw: bytes) -> None:
        """An admin change of one instance (`raw` empty: removed), and a new version."""
        await self.redis.eval(_INSTANCE, 2, self.key("instances"), self.key("instances", "version"), name, raw)

    async def instances_version(self) -> bytes | None:
        return await self.redis.get(self.key("instances", "version"))

    async def instance_changes(self) -> dict[bytes, bytes]:
        return await self.redis.hgetall(self.key("instances"))

    # ------------------------------------------------------------------ routed prompts

    async def add_routes(self, entries: Sequence[Mapping[bytes, bytes]], max_entries: int) -> None:
        async with self.redis.pipeline(transaction=False) as p:
            for fields in entries:
                p.xadd(self.key("routes"), dict(fields), maxlen=max_entries, approximate=True)
            await p.execute()

    async def routes_tail(self) -> bytes:
        """The id of the stream's newest entry ("0-0" when empty): reading starts after it."""
        info = await self.redis.xrevrange(self.key("routes"), count=1)
        return info[0][0] if info else b"0-0"

    async def read_routes(self, after: bytes, count: int) -> list[tuple[bytes, dict[bytes, bytes]]]:
        got = await self.redis.xread({self.key("routes"): after}, count=count)
        return list(got[0][1]) if got else []

    # ------------------------------------------------------------------ queries

    async def put_queries(self, answers: Mapping[str, bytes], ttl_s: float) -> None:
        async with self.redis.pipeline(transaction=False) as p:
            for qid, raw in answers.items():
                p.set(self.key("query", qid), raw, px=max(int(ttl_s * 1000), 1))
            await p.execute()

    async def get_query(self, ref: str) -> Any:
        return await self.redis.get(self.key("query", ref))
