"""This gateway as one replica of a shared state (`gateway.state`, docs/replicas.md).

Joining: connect to the Redis of `gateway.state.url` (an unreachable or malformed URL is
a `ConfigError`: one line at start-up), claim the state's config version (another
replica's instances or policies differ: refused by name), take a replica number (query
ids carry it, so they are unique across replicas), and start the sync loop
(`flowserve.replicas.sync`). Leaving removes this replica's report, so its peers drop its
share of the load at once instead of after two heartbeats.

A replica is composed with the host (`flowserve.host.root`) and joins before the driver
starts. It hears the host's facts — a call sent (its routed prompt, for its peers), a
query ended (its answer, for `GET /v1/queries/ID` on any replica) — and hands what its
peers routed to the host's cache estimates (`EstimatedCaches.peer_routed`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import socket
from collections import OrderedDict
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import orjson
import redis.asyncio as aioredis

from flowserve.errors import ConfigError
from flowserve.graph.program import PROGRAM_WORKFLOW
from flowserve.host.driver import LiveDriver
from flowserve.host.facts import CallSent, Listener, QueryEnded
from flowserve.host.query import query_body
from flowserve.host.settings import GatewaySettings, ServeConfig, StateSettings
from flowserve.host.shared_instances import SharedInstances
from flowserve.replicas import fingerprint
from flowserve.replicas.codec import StateError, json_object
from flowserve.replicas.programs import ProgramRegistry
from flowserve.replicas.redis_server import INSTALL_HINT, PrivateRedis, redis_binary
from flowserve.replicas.store import LOST, StateStore, connect
from flowserve.replicas.sync import ReplicaSync
from flowserve.types.specs import InstanceSpec

ID_BITS = 32  # a replica's query ids: its number << 32 + a local count
# a replica's own number when the state's counter holds a foreign value: drawn at random,
# above any count a real counter reaches, and small enough for 62-bit ids
UNCOUNTED_NUMBERS = (1 << 24, (1 << 30) - (1 << 24))
PENDING_ANSWERS = 10_000  # finished queries held while Redis is lost (the oldest go first)


def describe(instances: Sequence[InstanceSpec], gateway: GatewaySettings) -> dict[str, Any]:
    """What replicas of one state must share: instances and policies."""
    return fingerprint.describe(instances, {"dispatch": gateway.dispatch, "dispatch_params": gateway.dispatch_params,
                                            "queue": gateway.queue, "queue_params": gateway.queue_params,
                                            "passes": gateway.passes})


def redacted(url: str) -> str:
    """The URL without its password (logs, /health, errors)."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    if not at or ":" not in creds:
        return url
    return f"{scheme}{sep}{creds.split(':', 1)[0]}:***@{host}"


async def open_store(s: StateSettings) -> StateStore:
    """A store whose Redis answered PING; ConfigError naming the URL otherwise."""
    store = StateStore(connect(s.url, s.timeout_ms / 1000), s.namespace)
    try:
        await store.ping()
    except (*LOST, aioredis.RedisError) as e:
        await store.aclose()
        raise ConfigError(f"gateway.state.url {redacted(s.url)}: Redis does not answer "
                          f"({type(e).__name__}: {e})") from None
    return store


async def claim_config(store: StateStore, mine: Mapping[str, Any], ttl_s: float, url: str) -> None:
    """Hold the state's config version; StateError naming what differs when another holds it."""
    raw = fingerprint.encode(mine)
    other = await store.hold_config(raw, ttl_s)
    if other is None:
        return
    try:
        theirs = orjson.loads(other)
    except orjson.JSONDecodeError:
        theirs = None
    readable = isinstance(theirs, dict) and all(isinstance(theirs.get(k), dict) for k in ("instances", "policy"))
    if readable:
        diff = fingerprint.differences(mine, theirs) or ["the description"]
    else:
        diff = ["the state holds no readable config (a key flowserve did not write)"]
    raise StateError(f"gateway.state {redacted(url)} (namespace {store.ns!r}) is shared by replicas with another "
                     f"config: {'; '.join(diff)}. Give every replica the same instances and policies, or another "
                     f"gateway.state.namespace")


def with_state(config: ServeConfig, url: str) -> ServeConfig:
    """The config with its state at `url` (the rest of `gateway.state` kept)."""
    state = config.gateway.state
    new = StateSettings(url=url) if state is None else state.model_copy(update={"url": url})
    return dataclasses.replace(config, gateway=config.gateway.model_copy(update={"state": new}))


@contextlib.contextmanager
def replicated(config: ServeConfig, workers: int) -> Iterator[ServeConfig]:
    """The config `workers` gateway processes run: several need a state to share — the
    config's, else a private redis-server on a unix socket while they run."""
    if workers <= 1 or config.gateway.state is not None:
        yield config
        return
    if redis_binary() is None:
        raise ConfigError(f"--workers {workers}: the workers share their state through Redis, and redis-server is "
                          f"not on PATH: give --state-url redis://HOST:PORT/DB, or {INSTALL_HINT}")
    with PrivateRedis() as server:
        yield with_state(config, server.url)


async def check_state(s: StateSettings, instances: Sequence[InstanceSpec], gateway: GatewaySettings) -> None:
    """Before serving: the state answers and takes this config (ConfigError otherwise)."""
    store = await open_store(s)
    try:
        await claim_config(store, describe(instances, gateway), 2 * s.heartbeat_s, s.url)
    except StateError as e:
        raise ConfigError(str(e)) from None
    finally:
        await store.aclose()


class ReplicaPart(Protocol):
    """What a replica keeps in the shared state beyond its report (the programs' parts)."""

    def pending(self) -> int:
        """Parts not yet written (the state was lost)."""
        ...

    def restore(self) -> Awaitable[None]:
        """Write every part again (the state is back)."""
        ...


class Replica:
    def __init__(self, settings: StateSettings, instances: Sequence[InstanceSpec], gateway: GatewaySettings) -> None:
        """Composed with the host; `join` connects it (before the driver starts)."""
        self.settings = settings
        self._mine = describe(instances, gateway)
        self.name = ""
        self.number = 0
        self._store: StateStore | None = None
        self._sync: ReplicaSync | None = None
        self._programs: ProgramRegistry | None = None
        self._instances: SharedInstances | None = None
        self._routes = False  # whether peers fold routed prompts into their prefix views
        self._answers: OrderedDict[str, bytes] = OrderedDict()  # finished queries not yet written

    def listeners(self) -> dict[type, list[Listener]]:
        """The host's facts this replica hears."""
        return {CallSent: [self.call_sent], QueryEnded: [self.query_ended]}

    @property
    def store(self) -> StateStore:
        if self._store is None:
            raise RuntimeError("the replica has not joined its state")
        return self._store

    @property
    def sync(self) -> ReplicaSync:
        if self._sync is None:
            raise RuntimeError("the replica has not joined its state")
        return self._sync

    @property
    def programs(self) -> ProgramRegistry:
        """The programs' registry in the shared state."""
        if self._programs is None:
            raise RuntimeError("the replica has not joined its state")
        return self._programs

    @property
    def instances(self) -> SharedInstances:
        """The admin API's instance changes, shared with the peers."""
        if self._instances is None:
            raise RuntimeError("the replica has not joined its state")
        return self._instances

    # ------------------------------------------------------------------ facts

    def call_sent(self, fact: CallSent) -> None:
        """A prompt this replica routed: its peers' prefix views learn it on the next tick."""
        if self._routes:
            self.sync.routed(fact.instance, fact.call.prompt)

    def query_ended(self, fact: QueryEnded) -> None:
        """A query ended here: its answer goes to the state on the next tick."""
        q = fact.query
        if q.workflow != PROGRAM_WORKFLOW:
            self._answers[q.ref] = orjson.dumps({"tenant": q.tenant, "body": query_body(q.ref, fact.result)},
                                               default=str)
            while len(self._answers) > PENDING_ANSWERS:
                self._answers.popitem(last=False)

    # ------------------------------------------------------------------ queries

    async def publish(self) -> None:
        if self._answers:
            batch = dict(self._answers)
            await self.store.put_queries(batch, self.settings.queries_ttl_s)
            for qid in batch:
                self._answers.pop(qid, None)

    async def query(self, query_id: str, tenant: str) -> dict[str, Any] | None:
        """Another replica's query of the tenant's, as it answered (None: unknown, another
        tenant's, or the state is lost)."""
        if self.sync.degraded:
            return None
        try:
            raw = await self.store.get_query(query_id)
        except LOST as e:
            self.sync.lost(e)
            return None
        except aioredis.RedisError as e:  # a foreign value under the key
            self.sync.refuse("query", str(e))
            return None
        if raw is None:
            return None
        try:
            answer = json_object(raw, f"query {query_id}")
            body = answer.get("body")
            if not isinstance(body, dict) or body.get("id") != query_id:
                raise StateError(f"query {query_id}: not a flowserve query's answer")
        except StateError as e:
            self.sync.refuse("query", str(e))
            return None
        return body if answer.get("tenant") == tenant else None

    # ------------------------------------------------------------------ life cycle

    async def join(self, driver: LiveDriver, parts: Sequence[ReplicaPart]) -> None:
        """Connect to the state, claim its config and a number; the sync is ready to start."""
        settings = self.settings
        store = await open_store(settings)
        mine, ttl = self._mine, 2 * settings.heartbeat_s
        try:
            await claim_config(store, mine, ttl, settings.url)
        except StateError as e:
            await store.aclose()
            raise ConfigError(str(e)) from None
        try:
            number, foreign = await store.claim_number(), None
        except StateError as e:  # refused like any foreign state: this replica numbers itself
            number, foreign = UNCOUNTED_NUMBERS[0] + secrets.randbelow(UNCOUNTED_NUMBERS[1]), e
        self.name = f"r{number}-{socket.gethostname()[:32]}-{os.getpid()}"
        self.number = number
        core = driver.core

        async def hold() -> None:
            await claim_config(store, mine, ttl, settings.url)

        sync = ReplicaSync(store, self.name, settings.sync_ms / 1000, settings.heartbeat_s, settings.route_ttl_s,
                           settings.route_entries, settings.route_blocks, core.own_load, core.tenant_costs,
                           driver.emit, driver.caches.peer_routed, driver.metrics.registry, hold,
                           lambda: sum(part.pending() for part in parts))
        if foreign is not None:
            sync.refuse("seq", f"{foreign}: this replica took the random number {number}")
        driver.number_queries_from((number << ID_BITS) + 1)
        self._routes = core.keeps_prefix_index
        sync.on_resync(lambda: store.keep_number(number))
        for part in parts:
            sync.on_resync(part.restore)
        instances = SharedInstances(store, sync, driver.add_instance, driver.remove_instance,
                                    lambda: {row["name"] for row in driver.instances()})
        sync.on_tick(self.publish)
        sync.on_tick(instances.tick)
        self._store, self._sync, self._instances = store, sync, instances
        self._programs = ProgramRegistry(store, self.name, settings.programs_ttl_s)

    async def start(self) -> None:
        """Once the driver runs: the instances its peers added or removed (a replica joining
        later starts with the instances its peers have), then the sync loop (it feeds the
        driver's inbox)."""
        try:
            await self.instances.catch_up()
        except aioredis.ResponseError as e:
            self.sync.refuse("instances", f"{self.store.key('instances')}: {e}")
        self.sync.start()

    async def leave(self) -> None:
        if self._sync is not None:
            await self._sync.stop()
        if self._store is not None:
            await self._store.aclose()

    def health(self) -> dict[str, Any]:
        return {"url": redacted(self.settings.url), "namespace": self.settings.namespace, **self.sync.health()}
