"""Programs across replicas: the program store of a host that is one replica of a shared
state (gateway.state), chosen at composition (`flowserve.host.programs.store`).

Each replica that receives a call of a program runs a local part of it — a core query,
as without replicas — while the registry in Redis (`flowserve.replicas.programs`) holds
the program itself: who opened it and with which deadline, whether it ended, and each
replica's totals. So a program's calls may land on any replica; its limits (calls per
program, open programs per tenant) hold across them; `GET` and `DELETE` answer the same
on every replica; and a program outlives the replica that opened it. Other replicas'
engine seconds reach the local part as `ProgramShared` (its attained service).

A call's answer goes to its client only after its replica wrote its totals, so a `GET`
on any replica right after counts it. Redis lost: the replica decides alone (local
limits, local summaries) and writes its parts again when Redis is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import redis.asyncio as aioredis

from flowserve.host.intake.openai_api import APIError
from flowserve.host.intake.tenancy import Headers
from flowserve.host.programs.open_program import OpenProgram
from flowserve.host.programs.store import LocalBook
from flowserve.host.query import CallHandle, QueryResult
from flowserve.host.settings import ProgramSettings
from flowserve.replicas.codec import StateError
from flowserve.replicas.programs import Part, ProgramRecord, ProgramRegistry, RegistryAnswer
from flowserve.replicas.store import LOST
from flowserve.replicas.sync import ReplicaSync
from flowserve.types.peers import ProgramShared
from flowserve.types.programs import ProgramEnd


class JoinedState(Protocol):
    """The replica a store belongs to (`flowserve.host.replica.Replica`), once it joined."""

    @property
    def sync(self) -> ReplicaSync: ...

    @property
    def programs(self) -> ProgramRegistry: ...


UNLIMITED = 1 << 40


class SharedPrograms:
    def __init__(self, replica: JoinedState, settings: ProgramSettings, put: Callable[[Any], None],
                 clock: Callable[[], float], summary_wait_s: float = 30.0) -> None:
        """replica: whose registry and sync it uses (once it joined, before serving);
        summary_wait_s: how long DELETE waits for a lost state (`gateway.state.summary_wait_s`)."""
        self._replica = replica
        self.summary_wait_s = summary_wait_s
        self.settings = settings
        self._put = put
        self._clock = clock
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def sync(self) -> ReplicaSync:
        return self._replica.sync

    @property
    def registry(self) -> ProgramRegistry:
        return self._replica.programs

    @property
    def me(self) -> str:
        return self.registry.replica

    @property
    def local(self) -> bool:
        """Redis lost: this replica decides alone (its own limits and summaries)."""
        return self.sync.degraded

    def _failed(self, e: BaseException) -> None:
        if isinstance(e, LOST):
            self.sync.lost(e)
        else:
            self.sync.refuse("program", str(e))

    # ------------------------------------------------------------------ opening and calls

    async def open(self, program_id: str, hdr: Headers) -> ProgramRecord | None:
        """The program's record, created by this call or found (raises APIError for a
        program of another tenant, an ended one, or the tenant's limit); None: Redis is
        lost, decide locally."""
        if self.sync.degraded:
            return None
        try:
            _, got = await self.registry.open(program_id, hdr.tenant, hdr.priority, hdr.cls,
                                                None if hdr.slo_s is None else hdr.slo_s * 1000, time.time(),
                                                self.settings.max_open_per_tenant)
        except LOST as e:
            self._failed(e)
            return None
        except (aioredis.RedisError, StateError) as e:  # a foreign value under the program's key
            self._failed(e)
            raise refused_record(program_id) from None
        if isinstance(got, int):
            raise open_limit(hdr.tenant, got, self.settings.max_open_per_tenant)
        return got

    async def count(self, prog: OpenProgram) -> ProgramRecord | None:
        """Count the call `prog.calls` just counted locally, against `programs.max_calls`
        over every replica: the record, or None when it cannot be known (degraded)."""
        if self.sync.degraded:
            prog.registration(False)  # written again, as totals, when the state is back
            return None
        async with prog.lock:
            try:
                if not prog.registered:
                    await self._restore(prog)
                how, got = await self.registry.count_call(prog.tenant, prog.id, prog.calls, self.settings.max_calls)
            except (*LOST, aioredis.RedisError, StateError) as e:
                prog.registration(False)
                self._failed(e)
                return None
        if how is RegistryAnswer.LIMIT:
            raise call_limit(prog.id, int(got or 0), self.settings.max_calls)
        if how is RegistryAnswer.GONE:
            return None
        assert isinstance(got, ProgramRecord)
        self.shared_service(prog, got)
        return got

    async def record(self, prog: OpenProgram) -> None:
        """Write this replica's totals of the program (after each of its calls)."""
        if self.sync.degraded:
            prog.registration(False)
            return
        async with prog.lock:
            try:
                if not prog.registered:
                    await self._restore(prog)
                await self.registry.record(prog.tenant, prog.id, self.part(prog), prog.instances, prog.threads)
            except (*LOST, aioredis.RedisError, StateError) as e:
                prog.registration(False)
                self._failed(e)

    def answer(self, prog: OpenProgram, ch: CallHandle) -> CallHandle:
        """The client's handle of a call: its answer comes once this replica wrote the call
        into the registry, so a GET on any replica right after counts it."""
        outer = dataclasses.replace(ch, done=asyncio.get_running_loop().create_future())

        def ended(f: asyncio.Future[QueryResult]) -> None:
            task = asyncio.ensure_future(self._finished(prog, f.result(), outer))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        ch.done.add_done_callback(ended)
        return outer

    async def _finished(self, prog: OpenProgram, r: QueryResult, outer: CallHandle) -> None:
        prog.call_result(r)
        try:
            await self.record(prog)
        finally:
            if not outer.done.done():
                outer.done.set_result(r)

    async def adopt(self, prog: OpenProgram, hdr: Headers, ended_error: Callable[[OpenProgram], APIError]
                    ) -> float | None:
        """Open or find the program in the registry: a local part of a program opened
        elsewhere takes its settings and what is left of its deadline (returned)."""
        rec = await self.open(prog.id, hdr)
        if rec is None:
            prog.registration(False)
            return hdr.slo_s
        if rec.ended is not None:
            prog.end(rec.ended)
            raise ended_error(prog)
        age = max(time.time() - rec.opened, 0.0)
        prog.adopt(rec.priority, rec.cls, None if rec.slo_ms is None else rec.slo_ms / 1000, self._clock() - age)
        return None if prog.slo_s is None else max(prog.slo_s - age, 1e-3)

    def part(self, prog: OpenProgram) -> Part:
        return Part(prog.calls, prog.done, prog.failed, prog.prompt_tokens, prog.cached_tokens, prog.output_tokens,
                    prog.service_s, prog.last_wall)

    async def _restore(self, prog: OpenProgram) -> None:
        """Register a part opened while Redis was lost (or lost with Redis' data)."""
        await self.registry.open(prog.id, prog.tenant, prog.priority, prog.cls,
                                 None if prog.slo_s is None else prog.slo_s * 1000, time.time() - self.age(prog),
                                 UNLIMITED)
        await self.registry.record(prog.tenant, prog.id, self.part(prog), prog.instances, prog.threads)
        prog.registration(True)

    def pending(self, progs: Iterable[OpenProgram]) -> int:
        return sum(not p.registered for p in progs)

    async def restore_all(self, progs: Iterable[OpenProgram]) -> None:
        """After Redis came back: every open part's totals, written again."""
        for prog in list(progs):
            if prog.handle is not None:
                async with prog.lock:
                    try:
                        await self._restore(prog)
                    except LOST:
                        raise
                    except (aioredis.RedisError, StateError) as e:  # a foreign value under this program's key
                        self._failed(e)

    def age(self, prog: OpenProgram) -> float:
        return self._clock() - prog.opened

    def shared_service(self, prog: OpenProgram, rec: ProgramRecord) -> None:
        if prog.handle is not None:
            self._put(ProgramShared(0.0, prog.handle.id, rec.service_s(without=self.me)))

    # ------------------------------------------------------------------ reading and ending

    async def sweep(self, book: LocalBook) -> None:
        """A local part idle (or too long) here ends when the program did — ended
        elsewhere, idle at every replica, or past its duration — else goes on; Redis lost,
        this replica's own rule."""
        if self.sync.degraded:
            book.sweep()
            return
        now, wall = self._clock(), time.time()
        s = self.settings
        for prog in list(book.open.values()):
            if prog.handle is None or prog.inflight or prog.ended is not None:
                continue
            if now - prog.last < s.idle_s and now - prog.opened <= s.max_duration_s:
                continue
            rec = await self.read(prog.tenant, prog.id)
            if rec is None:  # lost with Redis' data, or Redis lost: this replica's own rule
                book.close(prog, ProgramEnd.IDLE if now - prog.last >= s.idle_s else ProgramEnd.DURATION)
            elif rec.ended is not None:
                book.close(prog, rec.ended)
            elif wall - rec.opened > s.max_duration_s or (wall - max(rec.last(), rec.opened) >= s.idle_s
                                                           and self.live_inflight(rec) == 0):
                how = ProgramEnd.DURATION if wall - rec.opened > s.max_duration_s else ProgramEnd.IDLE
                await self.end(prog.id, prog.tenant, how)
                book.close(prog, how)
            else:
                self.shared_service(prog, rec)

    async def state_back(self, timeout_s: float) -> bool:
        """Wait (up to `timeout_s`) for a lost state to answer again; whether it does."""
        if self.sync.degraded:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.sync.up.wait(), timeout_s)
        return not self.sync.degraded

    async def read(self, tenant: str, program_id: str) -> ProgramRecord | None:
        """None: not in the state, or the state cannot answer (the caller falls back to its own)."""
        if self.sync.degraded:
            return None
        try:
            return await self.registry.read(tenant, program_id)
        except (*LOST, aioredis.RedisError, StateError) as e:
            self._failed(e)
            return None

    async def end(self, program_id: str, tenant: str, how: ProgramEnd
                  ) -> tuple[RegistryAnswer, ProgramRecord | None, int]:
        """End the program in the registry: (how, record, the epoch after which peers' reports
        say they wrote everything of it)."""
        try:
            answer, rec = await self.registry.end(program_id, tenant, how, time.time())
        except (*LOST, aioredis.RedisError, StateError) as e:
            self._failed(e)
            return RegistryAnswer.GONE, None, 0
        try:
            epoch = await self.registry.store.bump_epoch()
        except (*LOST, aioredis.RedisError, StateError) as e:  # ended all the same: its summary waits on no epoch
            if isinstance(e, LOST):
                self.sync.lost(e)
            else:
                self.sync.refuse("epoch", f"{e}: program summaries do not wait for peers' reports")
            epoch = 0
        return answer, rec, epoch

    def live_inflight(self, rec: ProgramRecord) -> int:
        """Calls in flight at replicas that are alive (a dead one's are lost)."""
        alive = {self.me, *self.sync.tracker.peers}
        return sum(p.inflight for r, p in rec.parts.items() if r in alive)

    async def settled(self, tenant: str, program_id: str, epoch: int, timeout_s: float) -> ProgramRecord | None:
        """The record once it is whole (or at the timeout): no live replica has a call of the
        program in flight, every live peer reported after `epoch` with nothing left to write,
        and this replica has had the state for two heartbeats (so a peer without a report
        is gone, not still finding Redis again)."""
        deadline = self._clock() + timeout_s
        while True:
            rec = await self.read(tenant, program_id)
            if rec is None or self._clock() >= deadline:
                return rec
            peers = self.sync.tracker.reports.values()
            if self.live_inflight(rec) == 0 and all(r.epoch >= epoch and not r.pending for r in peers) \
                    and time.monotonic() - self.sync.up_since >= 2 * self.sync.heartbeat_s:
                return rec
            await asyncio.sleep(self.sync.sync_s)  # other replicas' calls end, and report, on their own time

    async def state(self, tenant: str, program_id: str) -> dict[str, Any] | None:
        rec = await self.read(tenant, program_id)
        return None if rec is None else self._state(rec)

    async def delete(self, program_id: str, tenant: str, book: LocalBook) -> tuple[dict[str, Any] | None, bool]:
        """Ended in the registry: this replica's part ends, then every live replica's calls,
        and the summary is the program's over every replica. Unknown there (or the state
        lost): this replica's part decides, marked partial while the state is lost."""
        partial = not await self.state_back(self.summary_wait_s)
        if await self.read(tenant, program_id) is None:
            return None, partial
        how, _, epoch = await self.end(program_id, tenant, ProgramEnd.DELETED)
        if how is RegistryAnswer.ALREADY:
            raise APIError(409, f"program {program_id!r} has already ended", code="program_ended",
                           param="program_id")
        if how is not RegistryAnswer.ENDED:
            return None, partial
        prog = await book.end_here(tenant, program_id)
        rec = await self.settled(tenant, program_id, epoch, self.summary_wait_s)
        if rec is not None:
            return self.summary(rec), False
        if prog is not None and prog.summary is not None:
            return prog.summary, False
        raise APIError(404, f"no program {program_id!r}", code="program_not_found", param="program_id")

    def _state(self, rec: ProgramRecord) -> dict[str, Any]:
        """`GET`: the summary once ended and no live replica has a call of it in flight;
        "closing" until then."""
        if rec.ended is not None and self.live_inflight(rec) == 0:
            return self.summary(rec)
        now = time.time()
        return {"id": rec.id, "status": "open" if rec.ended is None else "closing", "calls": rec.calls,
                "calls_in_flight": self.live_inflight(rec), "age_s": now - rec.opened,
                "idle_s": now - max(rec.last(), rec.opened), "slo_ms": rec.slo_ms, "replicas": sorted(rec.parts)}

    def summary(self, rec: ProgramRecord) -> dict[str, Any]:
        """The program's summary over every replica: each call counted once."""
        parts = rec.parts.values()
        alive = {self.me, *self.sync.tracker.peers}
        lost = sum(p.inflight for r, p in rec.parts.items() if r not in alive)
        last = rec.last()
        latency = last - rec.opened if last else None
        met = None if rec.slo_ms is None or latency is None else latency * 1000 <= rec.slo_ms
        return {"id": rec.id, "status": "ended", "ended": rec.ended, "reason": None, "calls": rec.calls,
                "failed_calls": sum(p.failed for p in parts) + lost, "lost_calls": lost,
                "prompt_tokens": sum(p.prompt for p in parts), "cached_tokens": sum(p.cached for p in parts),
                "output_tokens": sum(p.output for p in parts), "threads": list(rec.threads),
                "latency_s": latency, "slo_ms": rec.slo_ms, "deadline_met": met, "instances": list(rec.instances),
                "replicas": sorted(rec.parts)}


def refused_record(program_id: str) -> APIError:
    return APIError(409, f"program id {program_id!r}: its record in the shared state is not a flowserve program "
                         f"(refused); choose another id", code="program_state_refused", param="x-flowserve-program")


def open_limit(tenant: str, n: int, limit: int) -> APIError:
    return APIError(429, f"tenant {tenant!r} has {n} programs open (programs.max_open_per_tenant {limit}); end some "
                         f"(DELETE /v1/programs/ID)", "rate_limit_error", "program_limit_exceeded")


def call_limit(program_id: str, n: int, limit: int) -> APIError:
    return APIError(429, f"program {program_id!r} made {n} calls (programs.max_calls {limit})", "rate_limit_error",
                    "program_limit_exceeded")
