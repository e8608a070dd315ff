"""The live replica sync: one asyncio task per gateway that exchanges state with its
peers through Redis every `sync_ms`, on the driver side of the sans-IO core.

Each tick it (1) appends this replica's routed prompts to the routes stream, (2) writes
its report (load per instance, tenants' service) when it changed or a heartbeat is due,
with a TTL of two heartbeats, (3) reads every peer's report and turns the changes into
`PeerLoad` / `PeerService` events (`flowserve.replicas.peers`), (4) reads the peers' new
routed prompts, rebuilds them from known blocks and hands them on as `PeerRouted`.
Events go into the driver's inbox like any other; the core never waits for Redis.

Redis lost (refused, timed out): the replica keeps serving on its local view, says so
once in the log, on `/health` and in `flowserve_state_degraded`, and keeps trying; peers'
shares are dropped once their reports would have expired. When Redis answers again the
replica re-syncs: its report and every registered part (programs, queries) are written
again, as totals, so nothing is lost or counted twice. State it cannot parse — a foreign
key, a wrong type — is refused with a log line (once per kind) and skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry, Counter, Gauge

from flowserve.replicas.codec import StateError, encode_report, encode_route, parse_report, parse_route
from flowserve.replicas.exchange import Exchange
from flowserve.replicas.peers import Report
from flowserve.replicas.store import LOST, StateStore
from flowserve.types.peers import InstanceLoad, PeerRouted
from flowserve.types.work import Tokens

log = logging.getLogger("flowserve.replicas")
READ_BATCH = 1000  # routed prompts read per tick
ROUTE_BACKLOG = 2000  # a starting replica folds in the latest routed prompts
PENDING_ROUTES = 10_000  # routed prompts held while Redis is lost (the oldest go first)


class SyncMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.degraded = Gauge("flowserve_state_degraded", "1 while the shared state (Redis) is lost and this replica "
                              "serves on its local view", registry=r)
        self.peers = Gauge("flowserve_state_peers", "Peer replicas with a current report", registry=r)
        self.lost = Counter("flowserve_state_lost", "Times the shared state stopped answering", registry=r)
        self.refused = Counter("flowserve_state_refused", "Pieces of shared state refused (foreign keys, wrong "
                               "types), by kind", ["kind"], registry=r)
        self.routes = Counter("flowserve_state_routes", "Routed prompts shared: sent, received, unknown (blocks "
                              "this replica could not rebuild)", ["what"], registry=r)


class ReplicaSync:
    def __init__(self, store: StateStore, replica: str, sync_s: float, heartbeat_s: float, route_ttl_s: float,
                 route_entries: int, route_blocks: int, loads: Callable[[], tuple[InstanceLoad, ...]],
                 costs: Callable[[], Mapping[str, float]], put: Callable[[Any], None],
                 peer_routed: Callable[[PeerRouted], None], registry: CollectorRegistry,
                 hold_config: Callable[[], Awaitable[None]], pending: Callable[[], int] = lambda: 0) -> None:
        """loads, costs: the core's `own_load` and `tenant_costs`; put: the driver's inbox;
        peer_routed: hands a peer's routed prompt to the driver; hold_config: refreshes
        this replica's claim on the state's config (raises on a conflict); pending: the
        parts this replica has not written yet (its report says so)."""
        self.store = store
        self.replica = replica
        self.sync_s, self.heartbeat_s = sync_s, heartbeat_s
        self.route_entries = route_entries
        self._loads, self._costs, self._put, self._peer_routed = loads, costs, put, peer_routed
        self._hold_config = hold_config
        self.exchange = Exchange(replica, route_blocks, route_ttl_s)
        self.tracker = self.exchange.tracker
        self.metrics = SyncMetrics(registry)
        self._routes: deque[dict[bytes, bytes]] = deque(maxlen=PENDING_ROUTES)
        self._after: bytes | None = None  # the last routed prompt read
        self._last_report: tuple[Report | None, float] = (None, -1e18)
        self._last_config = -1e18
        self.degraded_since: float | None = None
        self.up = asyncio.Event()  # set while Redis answers
        self.up.set()
        self._refusals: set[str] = set()
        self._resync: list[Callable[[], Awaitable[None]]] = []
        self._flush: list[Callable[[], Awaitable[None]]] = []
        self._pending = pending
        self._epoch = 0  # the state's epoch as last read
        self.up_since = -math.inf  # since when Redis answers again (after it was lost)
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    # ------------------------------------------------------------------ life cycle

    def on_resync(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Run `fn` after Redis came back (it writes its part's state again, as totals)."""
        self._resync.append(fn)

    def on_tick(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Run `fn` on every tick (it writes what its part buffered)."""
        self._flush.append(fn)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="flowserve-replica-sync")

    async def stop(self) -> None:
        # the flag as well as the cancel: redis-py may turn a cancel that lands inside a
        # command into a ConnectionError, which the loop takes for Redis lost and goes on
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(*LOST, aioredis.RedisError):  # a clean leave: peers drop our share now
            await self.store.redis.delete(self.store.key("report", self.replica))
            await self.store.drop_replicas([self.replica])

    @property
    def degraded(self) -> bool:
        return self.degraded_since is not None

    def health(self) -> dict[str, Any]:
        out: dict[str, Any] = {"replica": self.replica, "peers": len(self.tracker.peers), "degraded": self.degraded}
        if self.degraded_since is not None:
            out["degraded_s"] = round(time.monotonic() - self.degraded_since, 3)
        return out

    # ------------------------------------------------------------------ routed prompts

    def routed(self, instance: str, tokens: Tokens) -> None:
        """This replica sent a prompt to `instance` (shared on the next tick)."""
        entry = self.exchange.route(instance, tokens, time.time())
        if entry is not None:
            self._routes.append(encode_route(entry))

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        while not self._stopping:
            try:
                await self.tick()
            except LOST as e:
                self.lost(e)
            except Exception:  # a bug must not stop the sync: say so, keep going
                log.exception("replica sync failed")
            await asyncio.sleep(self.sync_s)

    async def tick(self) -> None:
        """One exchange. Redis lost raises (the tick stops there); a part Redis refuses
        (a foreign value under its key) or this replica cannot parse is refused alone."""
        now = time.monotonic()
        if self.degraded_since is not None:
            await self.store.ping()
            await self._recovered(now)
        steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("config", self._config), ("routes", self._send_routes), *(("flush", fn) for fn in self._flush),
            ("report", lambda: self._send_report(now)), ("reports", lambda: self._read_reports(now)),
            ("routes", self._read_routes)]
        for kind, step in steps:
            try:
                await step()
            except (aioredis.ResponseError, StateError) as e:
                self.refuse(kind, f"{kind}: {e}")

    async def _config(self) -> None:
        now = time.monotonic()
        if now - self._last_config >= self.heartbeat_s:
            self._last_config = now  # a conflict is said once per heartbeat, not every tick
            await self._hold_config()

    async def _send_routes(self) -> None:
        if not self._routes:
            return
        batch = list(self._routes)
        await self.store.add_routes(batch, self.route_entries)
        for _ in batch:
            self._routes.popleft()
        self.metrics.routes.labels("sent").inc(len(batch))

    async def _send_report(self, now: float) -> None:
        report = self.exchange.report(time.time(), self._loads(), self._costs(), self._epoch, self._pending())
        last, when = self._last_report
        if last is not None and (last.loads, last.tenants, last.epoch, last.pending) == \
                (report.loads, report.tenants, report.epoch, report.pending) and now - when < self.heartbeat_s / 2:
            return
        await self.store.write_report(self.replica, encode_report(report), 2 * self.heartbeat_s)
        self._last_report = (report, now)

    async def _read_reports(self, now: float) -> None:
        reports: dict[str, Report] = {}
        gone = []
        raws, epoch = await self.store.read_reports()
        if epoch is None:
            self.refuse("epoch", f"{self.store.key('epoch')} is not a flowserve counter: program summaries do not "
                                 f"wait for peers' reports")
        self._epoch = epoch or 0
        for name, raw in raws.items():
            if name == self.replica:
                continue
            if raw is None:
                gone.append(name)
                continue
            try:
                reports[name] = parse_report(raw, name)
            except StateError as e:
                self.refuse("report", str(e))
        for ev in self.exchange.peers(now, reports):
            self._put(ev)
        self.metrics.peers.set(len(self.tracker.peers))
        if gone:
            await self.store.drop_replicas(gone)

    async def _read_routes(self) -> None:
        if self._after is None:
            back = await self.store.redis.xrevrange(self.store.key("routes"), count=ROUTE_BACKLOG)
            self._after = back[-1][0] if back else b"0-0"
        wall = time.time()
        decoder = self.exchange.decoder
        for entry_id, fields in await self.store.read_routes(self._after, READ_BATCH):
            self._after = entry_id
            unknown = decoder.unknown_blocks
            try:
                events = self.exchange.routes(wall, [parse_route(fields)], at=0.0)
            except (StateError, ValueError) as err:
                self.refuse("route", str(err))
                continue
            self.metrics.routes.labels("received").inc()
            self.metrics.routes.labels("unknown").inc(decoder.unknown_blocks - unknown)
            for ev in events:
                self._peer_routed(ev)

    # ------------------------------------------------------------------ losing and finding Redis

    def lost(self, e: BaseException) -> None:
        """A Redis command failed: serve on, degraded (said once), until Redis answers again."""
        now = time.monotonic()
        if self.degraded_since is None:
            self.degraded_since = now
            self.up.clear()
            self.metrics.degraded.set(1)
            self.metrics.lost.inc()
            log.warning("shared state lost (%s: %s): serving on this replica's own view until Redis answers",
                        type(e).__name__, e)
        elif now - self.degraded_since > 2 * self.heartbeat_s and self.tracker.peers:
            for ev in self.tracker.forget(now):  # their reports would have expired by now
                self._put(ev)
            self.metrics.peers.set(0)

    async def _recovered(self, now: float) -> None:
        assert self.degraded_since is not None
        lost_s = now - self.degraded_since
        self._last_report = (None, -1e18)
        self._last_config = -1e18
        for fn in self._resync:
            try:
                await fn()
            except (aioredis.ResponseError, StateError) as e:  # foreign state under one part's keys
                self.refuse("resync", str(e))
        self.degraded_since = None
        self.up_since = now
        self.up.set()
        self.metrics.degraded.set(0)
        log.warning("shared state back after %.1f s: this replica's state written again", lost_s)

    def refuse(self, kind: str, message: str) -> None:
        """Refuse a piece of shared state: counted always, logged once per kind and message."""
        self.metrics.refused.labels(kind).inc()
        if message not in self._refusals and len(self._refusals) < 1000:
            self._refusals.add(message)
            log.error("shared state refused: %s", message)
