"""`flowserve bench live` part `admission`: admission control that models batching.

Two simulated A100s serving llama-3.1-8b behind the live driver (time scale 5, so the
engines run five times faster than the hardware they model; latencies are reported in
modelled seconds). A one-call workload (1,000-token prompts, 200 output tokens) arrives
as a Poisson process: first alone (the unloaded latency L0), then at a load the cluster
sustains and at three times that, with `max_queue_s` = 5·L0. Issue 9's targets: < 1%
refused at the sustained load; at 3× the accepted queries' p99 ≤ max_queue_s + their
service time (taken as the sustained run's p99).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from rich.console import Console

from flowserve.apps.single import SingleCall
from flowserve.host.query import Rejected
from flowserve.host.root import compose_driver
from flowserve.host.settings import GatewaySettings
from flowserve.metrics.tables import markdown_table
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import WorkflowRef

SCALE = 5.0
PROMPT, OUTPUT = 1000, 200


async def _run(rate: float, queries: int, max_queue_s: float | None, seed: int) -> dict[str, Any]:
    specs = [InstanceSpec(f"a100-{i}", "A100-80G", "llama-3.1-8b", backend="sim") for i in range(2)]
    d = compose_driver(specs, GatewaySettings(time_scale=SCALE, max_queue_s=None if max_queue_s is None
                                              else max_queue_s / SCALE, dispatch="least_load"))
    rng = np.random.default_rng(seed)
    await d.start()
    lat: list[float] = []
    refused = 0

    async def one(i: int) -> None:
        nonlocal refused
        prompt = tuple(int(x) for x in rng.integers(100, 30_000, PROMPT))
        try:
            ref = WorkflowRef(SingleCall.name, ("completion", prompt, OUTPUT, None))
            h = await d.submit(d.new_query("completion", ref))
        except Rejected:
            refused += 1
            return
        r = await h.done
        if r.completed:
            lat.append(r.latency_s * SCALE)

    tasks = []
    try:
        for i in range(queries):
            tasks.append(asyncio.create_task(one(i)))
            await asyncio.sleep(rng.exponential(1.0 / (rate * SCALE)))
        await asyncio.gather(*tasks)
    finally:
        await d.shutdown(5.0)
    arr = np.asarray(lat or [0.0])
    return {"rate": rate, "queries": queries, "refused": refused, "refused_frac": refused / queries,
            "p50_s": float(np.percentile(arr, 50)), "p99_s": float(np.percentile(arr, 99))}


def admission_bench(console: Console, rate: float = 6.0, queries: int = 600) -> dict[str, Any]:
    unloaded = asyncio.run(_run(0.2, 5, None, 1))
    l0 = unloaded["p50_s"]
    bound = 5 * l0
    sustained = asyncio.run(_run(rate, queries, bound, 2))
    unbounded = asyncio.run(_run(rate, queries, None, 2))
    overload = asyncio.run(_run(3 * rate, queries, bound, 3))
    service = sustained["p99_s"]
    out = {"unloaded_p50_s": l0, "max_queue_s": bound, "sustained": sustained, "sustained_no_admission": unbounded,
           "overload_3x": overload,
           "goal_sustained_refused_below": 0.01, "goal_overload_p99_below_s": bound + service,
           "sustained_ok": sustained["refused_frac"] < 0.01 and sustained["p50_s"] <= 1.5 * l0,
           "overload_ok": overload["p99_s"] <= bound + service}
    console.print(markdown_table(
        ["run", "rate/s", "refused", "p50 s", "p99 s"],
        [["unloaded", 0.2, 0, round(l0, 2), round(unloaded["p99_s"], 2)],
         *[[name, r["rate"], f"{r['refused_frac']:.1%}", round(r["p50_s"], 2), round(r["p99_s"], 2)]
           for name, r in (("sustained, admission off", unbounded), ("sustained", sustained),
                           ("3x overload", overload))]]), highlight=False)
    console.print(f"max_queue_s = 5·L0 = {bound:.1f} s; sustained: p50 ≤ 1.5·L0 and < 1% refused: "
                  f"{out['sustained_ok']}; 3x: accepted p99 ≤ {bound + service:.1f} s: {out['overload_ok']}",
                  highlight=False)
    return out
