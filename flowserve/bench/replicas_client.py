"""The live client of `flowserve bench replicas`: sends the bench's workload to N replicas
round-robin (each request to the next replica: no affinity, the worst case), `time_scale`
times faster than simulated time, and keeps what each request met.

A request that cannot connect (its replica is dead) never reached anyone: it goes to the
next live replica. A request cut while in flight (its replica died under it) failed: it
is counted, never sent again (the client cannot know whether it ran). A program's calls
go one after the other, each to the next replica; when the last is answered the client
ends the program (`DELETE`) at the next replica and checks its summary against what it
saw: calls, tokens, and the calls lost in flight.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from flowserve.bench.replicas_workload import PROGRAM
from flowserve.graph.plan import CallStep, QueryPlan
from flowserve.tokenize.segments import TokenMaterializer
from flowserve.workloads.base import Workload

MODEL = "llama-3.1-70b"
VOCAB = 32_000
KEY = "sk-bench-replicas"


@dataclass(frozen=True)
class ClientCall:
    query: int
    tenant: str
    replica: int
    sent: float
    done: float = 0.0
    status: int = 0  # HTTP status; 0: cut in flight
    prompt: int = 0
    cached: int = 0
    output: int = 0


@dataclass
class ProgramCheck:
    id: str
    reached: int = 0  # calls that reached a replica
    answered: int = 0
    cut: int = 0  # cut in flight by a replica's death
    prompt: int = 0
    cached: int = 0
    output: int = 0
    summary: dict[str, Any] = field(default_factory=dict)

    def saw(self, call: ClientCall) -> None:
        """One of its calls, as the client saw it."""
        self.reached += 1
        if call.status == 200:
            self.answered += 1
            self.prompt += call.prompt
            self.cached += call.cached
            self.output += call.output
        elif call.status == 0:
            self.cut += 1

    def ended(self, summary: dict[str, Any]) -> None:
        self.summary = summary

    def mismatches(self) -> list[str]:
        """What the summary says otherwise than the client saw. A call cut in flight either
        started (the summary counts it, as lost) or was cut before its replica took it."""
        s = self.summary
        if "error" in s:
            return [f"{self.id}: DELETE answered {s['error']}"]
        lost = s.get("lost_calls", 0)
        out = [f"{self.id}: {k} {s.get(k)} != {v}" for k, v in (("prompt_tokens", self.prompt), (
            "cached_tokens", self.cached), ("output_tokens", self.output)) if s.get(k) != v]
        if not isinstance(s.get("calls"), int) or s["calls"] - lost != self.reached - self.cut or lost > self.cut:
            out.append(f"{self.id}: calls {s.get('calls')} (lost {lost}) for {self.reached} sent, {self.cut} cut")
        return out


@dataclass
class ClientRun:
    calls: list[ClientCall] = field(default_factory=list)
    programs: list[ProgramCheck] = field(default_factory=list)
    rerouted: int = 0  # requests whose replica was dead before they reached it
    wall_s: float = 0.0

    def rerouted_one(self) -> None:
        self.rerouted += 1

    def took(self, wall_s: float) -> None:
        self.wall_s = wall_s


class Replicas:
    """The replicas' URLs in turn, skipping those found dead."""

    def __init__(self, urls: Sequence[str]) -> None:
        self.urls = list(urls)
        self.dead: set[int] = set()
        self._turn = itertools.count()

    def next(self) -> int:
        for _ in range(len(self.urls)):
            i = next(self._turn) % len(self.urls)
            if i not in self.dead:
                return i
        raise RuntimeError("every replica is dead")


async def post(http: httpx.AsyncClient, reps: Replicas, run: ClientRun, body: dict[str, Any],
               headers: dict[str, str], query: int, tenant: str) -> ClientCall:
    """One completion at the next live replica (another one if it cannot connect)."""
    while True:
        i = reps.next()
        sent = time.perf_counter()
        try:
            r = await http.post(f"{reps.urls[i]}/v1/completions", json=body, headers=headers)
        except httpx.ConnectError:
            reps.dead.add(i)
            run.rerouted_one()
            continue
        except httpx.TransportError:  # cut in flight: failed, never sent again
            call = ClientCall(query, tenant, i, sent, time.perf_counter())
            reps.dead.add(i)
            run.calls.append(call)
            return call
        done = time.perf_counter()
        if r.status_code == 200:
            usage = r.json()["usage"]
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            call = ClientCall(query, tenant, i, sent, done, 200, usage["prompt_tokens"], cached,
                              usage["completion_tokens"])
        else:
            call = ClientCall(query, tenant, i, sent, done, r.status_code)
        run.calls.append(call)
        return call


async def run_client(workload: Workload, urls: Sequence[str], time_scale: float,
                     at: Sequence[tuple[float, Callable[[], Awaitable[None]]]] = (), seed: int = 0) -> ClientRun:
    """Send the workload; `at`: (simulated seconds, action) run during it (a kill, an outage)."""
    tokens = TokenMaterializer(VOCAB, salt=seed)
    reps = Replicas(urls)
    run = ClientRun()
    start = time.perf_counter()
    limits = httpx.Limits(max_connections=512, max_keepalive_connections=64)
    async with httpx.AsyncClient(timeout=120.0, limits=limits, headers={"authorization": f"Bearer {KEY}"}) as http:

        async def at_time(t: float) -> None:
            await asyncio.sleep(max(0.0, start + t / time_scale - time.perf_counter()))

        async def one(q: Any) -> None:
            await at_time(q.arrival)
            plan = q.plan
            assert isinstance(plan, QueryPlan)
            steps = [step[0] for step in plan.steps if isinstance(step[0], CallStep)]
            if plan.workflow != PROGRAM:
                await post(http, reps, run, body(tokens, steps[0]), {"x-tenant": q.tenant}, q.id, q.tenant)
                return
            check = ProgramCheck(f"p{q.id}")
            run.programs.append(check)
            for k, step in enumerate(steps):
                call = await post(http, reps, run, body(tokens, step),
                                  {"x-tenant": q.tenant, "x-flowserve-program": check.id,
                                   "x-flowserve-stage": f"step{k}"}, q.id, q.tenant)
                check.saw(call)
            check.ended(await end_program(http, reps, check.id, q.tenant))

        async def act(t: float, action: Callable[[], Awaitable[None]]) -> None:
            await at_time(t)
            await action()

        await asyncio.gather(*(one(q) for q in workload.queries), *(act(t, a) for t, a in at))
    run.took(time.perf_counter() - start)
    return run


async def end_program(http: httpx.AsyncClient, reps: Replicas, pid: str, tenant: str) -> dict[str, Any]:
    """DELETE the program at the next replica; a DELETE cut by its replica's death may have
    ended it there, so a repeat that finds it ended reads the summary with GET (polled while
    its last calls are still in flight elsewhere)."""
    cut = False
    while True:
        i = reps.next()
        url = f"{reps.urls[i]}/v1/programs/{pid}"
        try:
            r = await http.delete(url, headers={"x-tenant": tenant})
            if r.status_code == 409 and cut and r.json()["error"].get("code") == "program_ended":
                while (r := await http.get(url, headers={"x-tenant": tenant})).json().get("status") == "closing":
                    await asyncio.sleep(0.05)  # polling another process's state
        except httpx.TransportError:
            reps.dead.add(i)
            cut = True
            continue
        return r.json() if r.status_code == 200 else {"error": f"{r.status_code} {r.text[:200]}"}


def body(tokens: TokenMaterializer, step: CallStep) -> dict[str, Any]:
    return {"model": MODEL, "prompt": list(tokens.prompt(step.prompt)), "max_tokens": step.output_tokens}
