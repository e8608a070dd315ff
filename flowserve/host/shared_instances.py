"""The admin API's instance changes across replicas (gateway.state).

`POST /admin/instances` and `DELETE /admin/instances/NAME` on one replica change every
replica's instance set: the change goes into the state first (`instances`: name → the
instance as it was sent, empty once removed; a version counter bumped with each change),
then this replica applies it; every other replica reads the version each heartbeat and,
when it moved, applies what changed. A replica that joins later applies the whole set
before it serves, so it starts with the instances its peers have. The state lost: a
change is refused (503) rather than made on one replica alone. A value flowserve did not
write is refused like any foreign state (logged once, counted) and skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import redis.asyncio as aioredis

from flowserve.config import InstanceConfig
from flowserve.errors import FlowserveError
from flowserve.host.intake.openai_api import APIError
from flowserve.replicas.store import LOST, StateStore
from flowserve.replicas.sync import ReplicaSync
from flowserve.schema import validate
from flowserve.types.specs import InstanceSpec

log = logging.getLogger("flowserve.replicas")
REMOVED = b""


def instance_spec(body: Any) -> InstanceSpec:
    """One instance as the admin API takes it (FlowserveError naming what is wrong)."""
    if not isinstance(body, dict):
        raise FlowserveError("expected an instance object")
    specs = validate(InstanceConfig, body, "instance").specs()
    if len(specs) != 1:
        raise FlowserveError("count: add one instance at a time")
    spec = specs[0]
    if spec.backend == "openai" and not spec.url:
        raise FlowserveError("url: backend openai needs a url")
    return spec


class SharedInstances:
    def __init__(self, store: StateStore, sync: ReplicaSync, add: Callable[[InstanceSpec], Awaitable[bool]],
                 remove: Callable[[str], Awaitable[None]], names: Callable[[], set[str]]) -> None:
        """add, remove: the driver's; names: the instances this replica has now."""
        self.store = store
        self.sync = sync
        self._add, self._remove, self._names = add, remove, names
        self._version: bytes | None = None  # the state's version last applied
        self._applied: dict[bytes, bytes] = {}  # name → what of it was applied here
        self._checked = -1e18

    # ------------------------------------------------------------------ this replica's changes

    async def share_add(self, body: dict[str, Any], spec: InstanceSpec) -> None:
        await self._put(spec.name, orjson.dumps(body))

    async def share_remove(self, name: str) -> None:
        await self._put(name, REMOVED)

    async def _put(self, name: str, raw: bytes) -> None:
        if self.sync.degraded:
            raise _lost()
        try:
            await self.store.put_instance(name, raw)
        except LOST as e:
            self.sync.lost(e)
            raise _lost() from None
        except aioredis.RedisError as e:  # a foreign value under the key
            self.sync.refuse("instances", f"{self.store.key('instances')}: {e}")
            raise APIError(503, f"the shared state's instance set is not flowserve's ({e}): instance changes "
                                f"are refused", "server_error", "state_refused") from None
        self._applied[name.encode()] = raw

    # ------------------------------------------------------------------ peers' changes

    async def tick(self) -> None:
        """On the sync's ticks: every heartbeat, the peers' changes since the last look."""
        now = time.monotonic()
        if now - self._checked >= self.sync.heartbeat_s:
            self._checked = now
            await self.catch_up()

    async def catch_up(self) -> None:
        """Apply what changed in the state's instance set (Redis errors raise to the sync)."""
        version = await self.store.instances_version()
        if version is None or version == self._version:
            return
        changes = await self.store.instance_changes()
        for name, raw in sorted(changes.items()):
            if self._applied.get(name) != raw:
                await self._apply(name.decode(errors="replace"), raw)
                self._applied[name] = raw
        self._version = version

    async def _apply(self, name: str, raw: bytes) -> None:
        if raw == REMOVED:
            if name in self._names():
                await self._remove(name)
                log.info("instance %s removed (by a peer replica)", name)
            return
        try:
            spec = instance_spec(orjson.loads(raw))
        except (orjson.JSONDecodeError, FlowserveError) as e:
            self.sync.refuse("instances", f"{self.store.key('instances')} {name[:64]!r}: not an instance ({e})")
            return
        if spec.name != name:
            self.sync.refuse("instances", f"{self.store.key('instances')} {name[:64]!r}: names {spec.name!r}")
            return
        try:
            up = await self._add(spec)
        except Exception as e:  # refused here as it would be by the admin route: said once, not retried
            self.sync.refuse("instances", f"instance {name[:64]!r} from a peer replica: {type(e).__name__}: {e}")
            return
        log.info("instance %s added (by a peer replica; %s)", name, "up" if up else "not answering yet")


def _lost() -> APIError:
    return APIError(503, "the shared state (Redis) does not answer: an instance change must reach every replica, "
                         "so it is refused until the state is back", "server_error", "state_lost",
                    headers={"Retry-After": "1"})
