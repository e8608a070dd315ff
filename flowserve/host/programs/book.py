"""Programs in the host: OpenAI calls that name a program become the steps of one core
query that grows call by call (`flowserve.graph.program`).

A program opens with its first call (the gateway admits it like any query: 429 when
full), which also fixes its tenant, priority, class and — with `x-slo-ms` — its
end-to-end deadline, counted from that call. Each later call is a `QueryInput` to the
same query and is answered on its own (`StepDone`). A program ends when its client
deletes it (`DELETE /v1/programs/{id}`: its summary), when no call came for
`programs.idle_s`, or when the core fails it; its summary is kept (`programs.kept`) so a
late call gets a clear 409 and `GET` still answers. Limits — calls per program, duration,
open programs per tenant — answer with a 4xx JSON error and change nothing. Program ids
are the tenant's own (the authenticated tenant, `flowserve.tenants`): two tenants may use
one id, each for its own program, and neither sees nor reaches the other's. Where programs
are kept beyond this process is the store the host was composed with
(`flowserve.host.programs.store`): this process alone, or the replicas' registry.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import Counter, Gauge

from flowserve.engines.backend import TokenSink
from flowserve.graph.program import MAIN_THREAD, PROGRAM_WORKFLOW, Program, ProgramCall
from flowserve.host.driver import LiveDriver
from flowserve.host.facts import ProgramEnded
from flowserve.host.intake.openai_api import APIError
from flowserve.host.intake.program_headers import ProgramHeaders
from flowserve.host.intake.tenancy import Headers
from flowserve.host.programs.open_program import OpenProgram
from flowserve.host.programs.store import ProgramStore
from flowserve.host.query import CallHandle, QueryResult
from flowserve.host.settings import ProgramSettings
from flowserve.types.events import CallCancelled, QueryClosed, QueryInput
from flowserve.types.programs import ProgramEnd
from flowserve.types.work import WorkflowRef

ENDED_HOW: Mapping[ProgramEnd, str] = {
    ProgramEnd.DELETED: "was deleted",
    ProgramEnd.DURATION: "ran longer than programs.max_duration_s",
    ProgramEnd.FAILED: "failed",
    ProgramEnd.SHUTDOWN: "ended when the gateway shut down",
}


class LivePrograms:
    def __init__(self, driver: LiveDriver, settings: ProgramSettings, clock: Callable[[], float],
                 store: ProgramStore) -> None:
        """store: where programs are kept beyond this process (`flowserve.host.programs.store`)."""
        self.driver = driver
        self.settings = settings
        self.clock = clock
        self.store = store
        self.open: dict[tuple[str, str], OpenProgram] = {}  # by (tenant, program id)
        self.ended: OrderedDict[tuple[str, str], OpenProgram] = OrderedDict()
        self.per_tenant: dict[str, int] = {}  # open programs by tenant
        self._ids = itertools.count(1)
        self._sweeper: asyncio.Task[None] | None = None
        r = driver.metrics.registry
        self.m_open = Gauge("flowserve_programs_open", "Programs open now", registry=r)
        self.m_open.set_function(lambda: len(self.open))
        self.m_calls = Counter("flowserve_program_calls", "Calls of programs, by outcome (sent, refused)",
                               ["outcome"], registry=r)

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        self._sweeper = asyncio.create_task(self._sweep_forever(), name="flowserve-programs")

    async def stop(self) -> None:
        """Stop the sweeper and close the open programs: each finishes once its calls are
        done, within the gateway's drain (not held open until the drain times out)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for prog in list(self.open.values()):
            h = prog.handle
            if h is not None and prog.end(ProgramEnd.SHUTDOWN):
                await self.driver.inputs.deliver(h.id, lambda now, qid=h.id: QueryClosed(now, qid))

    def pending(self) -> int:
        """A replica's parts of programs not yet in the shared registry."""
        return self.store.pending(self.open.values())

    async def restore(self) -> None:
        """The shared registry is back: every open part, written again."""
        await self.store.restore_all(self.open.values())

    # ------------------------------------------------------------------ calls

    async def call(self, ph: ProgramHeaders, hdr: Headers, explicit: Mapping[str, str], stage: str,
                   prompt: tuple[Any, ...], max_tokens: int, model: str, params: Mapping[str, Any],
                   sink: TokenSink | None) -> CallHandle:
        """Send one call of program `ph.program`, opening the program with its first call;
        returns the handle its answer comes to (raises APIError for a refused call)."""
        prog = await self._program(ph.program, hdr)
        if prog.ended is not None:  # deleted, its last calls still running
            raise self._refused(self._ended_error(prog))
        self._check(prog, hdr, explicit)
        prog.count_call()
        await self._count(prog)
        thread = ph.thread or MAIN_THREAD
        key = f"c{prog.calls}"
        handle = prog.handle
        assert handle is not None
        loop = asyncio.get_running_loop()
        ch = CallHandle(next(self._ids), handle.id, key, loop.create_future(), loop.create_future(), sink,
                        self.clock())
        handle.steps[key] = ch  # before the input: the core may send it at once
        prog.call_sent(key, thread, ch.sent)
        ch.done.add_done_callback(lambda _f: prog.call_over(key, self.clock()))
        data = ProgramCall(key, prompt, max_tokens, stage, thread, model, params)
        if not await self.driver.inputs.deliver(handle.id, lambda now: QueryInput(now, handle.id, data)):
            handle.steps.pop(key, None)
            prog.call_dropped(key)
            raise self._ended_error(prog)
        self.m_calls.labels("sent").inc()
        return self.store.answer(prog, ch)

    async def _count(self, prog: OpenProgram) -> None:
        """Count the call in the store (limits over every replica); a program that ended
        at another replica ends here too."""
        try:
            rec = await self.store.count(prog)
        except APIError as e:
            prog.uncount_call()
            raise self._refused(e) from None
        if rec is not None and rec.ended is not None:
            prog.uncount_call()
            self.close(prog, rec.ended)
            raise self._refused(self._ended_error(prog))

    def cancel(self, ch: CallHandle) -> None:
        """The client of a call went away: cancel that call alone (the program goes on)."""
        if not ch.done.done():
            self._deliver(ch.query_id, lambda now: CallCancelled(now, ch.query_id, ch.key, "the client went away"))

    def _deliver(self, query_id: int, event: Callable[[float], Any]) -> None:
        """Feed an event without waiting (callbacks, the sweeper); an ended query takes none."""
        task = asyncio.ensure_future(self.driver.inputs.deliver(query_id, event))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _program(self, program_id: str, hdr: Headers) -> OpenProgram:
        prog = self.open.get((hdr.tenant, program_id))
        if prog is None:
            done = self.ended.get((hdr.tenant, program_id))
            if done is not None and self.store.local:  # else the store says
                raise self._refused(self._ended_error(done))
            return await self._open(program_id, hdr)
        await self._admitted(prog)
        return prog

    @staticmethod
    async def _admitted(prog: OpenProgram) -> None:
        """Wait while the program's first call is being admitted; its refusal is ours too."""
        ready = prog.ready
        if ready is None:
            return
        await asyncio.wait([ready])
        if ready.cancelled():
            raise APIError(503, f"the first call of program {prog.id!r} was abandoned; retry",
                           "server_error", "service_unavailable")
        if ready.exception() is not None:
            raise ready.exception()  # type: ignore[misc]

    async def _open(self, program_id: str, hdr: Headers) -> OpenProgram:
        mine = self.per_tenant.get(hdr.tenant, 0)
        if self.store.local and mine >= self.settings.max_open_per_tenant:
            raise self._refused(APIError(
                429, f"tenant {hdr.tenant!r} has {mine} programs open (programs.max_open_per_tenant "
                     f"{self.settings.max_open_per_tenant}); end some (DELETE /v1/programs/ID)",
                "rate_limit_error", "program_limit_exceeded"))
        now = self.clock()
        prog = OpenProgram(program_id, hdr.tenant, hdr.priority, hdr.cls, hdr.slo_s, now,
                           ready=asyncio.get_running_loop().create_future(), last=now)
        self._add(prog)  # at once: a concurrent first call waits for this one
        assert prog.ready is not None
        try:
            slo_s = await self.store.adopt(prog, hdr, self._ended_error)
            h = self.driver.new_query(PROGRAM_WORKFLOW, WorkflowRef(Program.name, (program_id,)), None, hdr.tenant,
                                      prog.priority, slo_s, cls=prog.cls)
            await self.driver.submit(h)
        except Exception as e:
            self._remove(prog)
            prog.ready.set_exception(e)
            prog.ready.exception()  # retrieved: the waiters re-raise it
            raise
        except asyncio.CancelledError:
            self._remove(prog)
            prog.ready.cancel()
            raise
        prog.admitted(h)
        h.done.add_done_callback(lambda f: self._query_ended(prog, f))
        return prog

    def _add(self, prog: OpenProgram) -> None:
        self.open[(prog.tenant, prog.id)] = prog
        self.per_tenant[prog.tenant] = self.per_tenant.get(prog.tenant, 0) + 1

    def _remove(self, prog: OpenProgram) -> None:
        if self.open.pop((prog.tenant, prog.id), None) is not None:
            self.per_tenant[prog.tenant] -= 1
            if not self.per_tenant[prog.tenant]:
                del self.per_tenant[prog.tenant]

    def _check(self, prog: OpenProgram, hdr: Headers, explicit: Mapping[str, str]) -> None:
        """A call that would change the program's settings, or break its limits, is refused."""
        for header, sent, fixed in (("x-slo-ms", hdr.slo_s, prog.slo_s), ("x-priority", hdr.priority, prog.priority),
                                    ("x-flowserve-class", hdr.cls, prog.cls)):
            if header in explicit and sent != fixed:
                raise self._refused(APIError(400, f"{header}: the program's value was set by its first call",
                                             param=header))
        s = self.settings
        if prog.calls >= s.max_calls:
            raise self._refused(APIError(429, f"program {prog.id!r} made {prog.calls} calls (programs.max_calls "
                                              f"{s.max_calls})", "rate_limit_error", "program_limit_exceeded"))
        if self.clock() - prog.opened > s.max_duration_s:
            self.close(prog, ProgramEnd.DURATION)
            raise self._refused(self._ended_error(prog))

    def _refused(self, e: APIError) -> APIError:
        self.m_calls.labels("refused").inc()
        return e

    def _ended_error(self, prog: OpenProgram) -> APIError:
        if prog.ended is ProgramEnd.IDLE:
            how = f"ended after {self.settings.idle_s:g} s without a call"
        else:
            how = ENDED_HOW.get(prog.ended, "has ended") if prog.ended is not None else "has ended"
        return APIError(409, f"program {prog.id!r} {how}; send later calls under a new program id",
                        code="program_ended", param="x-flowserve-program")

    # ------------------------------------------------------------------ ending

    def close(self, prog: OpenProgram, how: ProgramEnd) -> None:
        """No more calls: the program finishes when its calls are done."""
        if not prog.end(how):
            return
        h = prog.handle
        if h is not None:
            self._deliver(h.id, lambda now: QueryClosed(now, h.id))

    def _query_ended(self, prog: OpenProgram, fut: asyncio.Future[QueryResult]) -> None:
        result = fut.result()
        if not result.completed:
            prog.end(ProgramEnd.FAILED)  # unless it had ended another way first
        self._remove(prog)
        prog.summarized(summary(prog, result))
        how = ProgramEnd.FAILED if not result.completed else prog.ended or ProgramEnd.DELETED
        met = None if prog.slo_s is None else bool(result.deadline_met)
        self.driver.facts.publish(ProgramEnded(self.clock(), how, result.completed, met))
        if self.settings.kept:
            self.ended[(prog.tenant, prog.id)] = prog
            while len(self.ended) > self.settings.kept:
                self.ended.popitem(last=False)

    async def delete(self, program_id: str, tenant: str) -> dict[str, Any]:
        """End a program and return its summary once its calls are done."""
        decided, partial = await self.store.delete(program_id, tenant, self)
        if decided is not None:
            return decided
        prog = self._find(program_id, tenant)
        if prog.summary is not None:
            raise APIError(409, f"program {program_id!r} has already ended", code="program_ended",
                           param="program_id")
        await self._admitted(prog)
        self.close(prog, ProgramEnd.DELETED)
        assert prog.handle is not None
        await asyncio.shield(prog.handle.done)
        assert prog.summary is not None
        return {**prog.summary, "partial": True} if partial else prog.summary

    async def end_here(self, tenant: str, program_id: str) -> OpenProgram | None:
        """Deleted in the shared registry: this replica's part ends once its calls are done
        and their totals written (None: it has no part here)."""
        prog = self.open.get((tenant, program_id))
        if prog is not None:
            await self._admitted(prog)
            self.close(prog, ProgramEnd.DELETED)
            assert prog.handle is not None
            await asyncio.shield(prog.handle.done)
            async with prog.lock:  # its last call's totals are written
                pass
        return prog

    async def state(self, program_id: str, tenant: str) -> dict[str, Any]:
        shared = await self.store.state(tenant, program_id)
        if shared is not None:
            return shared
        prog = self._find(program_id, tenant)
        if prog.summary is not None:
            return prog.summary
        now = self.clock()
        return {"id": prog.id, "status": "closing" if prog.ended else "open", "calls": prog.calls,
                "calls_in_flight": len(prog.inflight), "age_s": now - prog.opened, "idle_s": now - prog.last,
                "slo_ms": None if prog.slo_s is None else prog.slo_s * 1000}

    def _find(self, program_id: str, tenant: str) -> OpenProgram:
        prog = self.open.get((tenant, program_id)) or self.ended.get((tenant, program_id))
        if prog is None:
            raise not_found(program_id)
        return prog

    def sweep(self) -> None:
        """End the programs idle for `idle_s` or open longer than `max_duration_s`."""
        now = self.clock()
        for prog in list(self.open.values()):
            if prog.handle is None or prog.inflight:
                continue
            if now - prog.last >= self.settings.idle_s:
                self.close(prog, ProgramEnd.IDLE)
            elif now - prog.opened > self.settings.max_duration_s:
                self.close(prog, ProgramEnd.DURATION)

    async def _sweep_forever(self) -> None:
        every = min(1.0, self.settings.idle_s / 4)
        while True:
            await asyncio.sleep(every)
            await self.store.sweep(self)


def not_found(program_id: str) -> APIError:
    return APIError(404, f"no program {program_id!r}", code="program_not_found", param="program_id")


def summary(prog: OpenProgram, r: QueryResult) -> dict[str, Any]:
    """What a program did, as `DELETE` returns it."""
    out = r.output
    return {"id": prog.id, "status": "failed" if not r.completed else "ended", "ended": prog.ended,
            "reason": r.reason, "calls": out.get("calls", prog.calls), "failed_calls": out.get("failed_calls", 0),
            "prompt_tokens": out.get("prompt_tokens", 0), "cached_tokens": out.get("cached_tokens", 0),
            "output_tokens": out.get("output_tokens", 0), "threads": out.get("threads", []),
            "latency_s": r.latency_s if math.isfinite(r.latency_s) else None,
            "slo_ms": None if prog.slo_s is None else prog.slo_s * 1000, "deadline_met": r.deadline_met,
            "instances": sorted({s["instance"] for s in out.get("steps", {}).values() if s.get("instance")})}
