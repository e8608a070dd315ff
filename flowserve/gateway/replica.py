"""This gateway as one replica of a shared state (`gateway.state`, docs/replicas.md).

Joining: connect to the Redis of `gateway.state.url` (an unreachable or malformed URL is
a `ConfigError`: one line at start-up), claim the state's config version (another
replica's instances or policies differ: refused by name), take a replica number (query
ids carry it, so they are unique across replicas), and start the sync loop
(`flowserve.replicas.sync`). Leaving removes this replica's report, so its peers drop its
share of the load at once instead of after two heartbeats.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import socket
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson
import redis.asyncio as aioredis

from flowserve.errors import ConfigError
from flowserve.gateway.driver import LiveDriver
from flowserve.gateway.programs import ProgramBook
from flowserve.gateway.query import QueryHandle, query_body
from flowserve.gateway.settings import GatewaySettings, ServeConfig, StateSettings
from flowserve.gateway.shared_instances import SharedInstances
from flowserve.gateway.shared_programs import SharedPrograms
from flowserve.graph.program import PROGRAM_WORKFLOW
from flowserve.replicas import fingerprint
from flowserve.replicas.codec import StateError, json_object
from flowserve.replicas.programs import ProgramRegistry
from flowserve.replicas.redis_server import INSTALL_HINT, PrivateRedis, redis_binary
from flowserve.replicas.store import LOST, StateStore, connect
from flowserve.replicas.sync import ReplicaSync
from flowserve.types.peers import PeerRouted
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


class Replica:
    def __init__(self, store: StateStore, settings: StateSettings, name: str, number: int, sync: ReplicaSync,
                 instances: SharedInstances) -> None:
        self.store = store
        self.settings = settings
        self.name = name
        self.number = number
        self.sync = sync
        self.instances = instances  # the admin API's changes, shared
        self._answers: OrderedDict[str, bytes] = OrderedDict()  # finished queries not yet written

    # ------------------------------------------------------------------ queries

    def finished(self, h: QueryHandle) -> None:
        """A query ended here: its answer goes to the state on the next tick."""
        if h.done.done() and not h.done.cancelled() and h.workflow != PROGRAM_WORKFLOW:
            self._answers[h.ref] = orjson.dumps({"tenant": h.tenant, "body": query_body(h.ref, h.done.result())},
                                               default=str)
            while len(self._answers) > PENDING_ANSWERS:
                self._answers.popitem(last=False)

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

    @classmethod
    async def join(cls, settings: StateSettings, driver: LiveDriver, instances: Sequence[InstanceSpec],
                   programs: ProgramBook) -> Replica:
        store = await open_store(settings)
        mine = describe(instances, driver.settings)
        ttl = 2 * settings.heartbeat_s
        try:
            await claim_config(store, mine, ttl, settings.url)
        except StateError as e:
            await store.aclose()
            raise ConfigError(str(e)) from None
        try:
            number, foreign = await store.claim_number(), None
        except StateError as e:  # refused like any foreign state: this replica numbers itself
            number, foreign = UNCOUNTED_NUMBERS[0] + secrets.randbelow(UNCOUNTED_NUMBERS[1]), e
        name = f"r{number}-{socket.gethostname()[:32]}-{os.getpid()}"
        core = driver.core

        async def hold() -> None:
            await claim_config(store, mine, ttl, settings.url)

        runner = driver.runner

        def peer_routed(ev: PeerRouted) -> None:  # the instance's cache estimate learns it too
            est = runner.caches.get(ev.instance)
            if est is not None:
                for evicted in est.on_peer(ev.tokens, driver.clock()):
                    runner.emit(evicted)
            runner.emit(ev)

        sync = ReplicaSync(store, name, settings.sync_ms / 1000, settings.heartbeat_s, settings.route_ttl_s,
                           settings.route_entries, settings.route_blocks, core.own_load, core.tenant_costs,
                           runner.emit, peer_routed, driver.metrics.registry, hold)
        if foreign is not None:
            sync.refuse("seq", f"{foreign}: this replica took the random number {number}")
        driver.number_queries_from((number << ID_BITS) + 1)
        if core.keeps_prefix_index:
            runner.on_send = lambda instance, call: sync.routed(instance, call.prompt)
        shared_instances = SharedInstances(store, sync, driver.add_instance, driver.remove_instance,
                                           lambda: {row["name"] for row in driver.instances()})
        try:  # a replica joining later starts with the instances its peers have
            await shared_instances.catch_up()
        except aioredis.ResponseError as e:
            sync.refuse("instances", f"{store.key('instances')}: {e}")
        replica = cls(store, settings, name, number, sync, shared_instances)
        shared = SharedPrograms(ProgramRegistry(store, name, settings.programs_ttl_s), sync, programs.settings,
                                runner.emit, driver.clock, settings.summary_wait_s)
        programs.shared = shared
        sync.pending = lambda: sum(not p.registered for p in programs.open.values())
        sync.on_resync(lambda: store.keep_number(number))
        sync.on_resync(lambda: shared.restore_all(programs.open.values()))
        driver.book.on_resolved = replica.finished
        sync.on_tick(replica.publish)
        sync.on_tick(shared_instances.tick)
        sync.start()
        return replica

    async def leave(self) -> None:
        await self.sync.stop()
        await self.store.aclose()

    def health(self) -> dict[str, Any]:
        return {"url": redacted(self.settings.url), "namespace": self.settings.namespace, **self.sync.health()}
