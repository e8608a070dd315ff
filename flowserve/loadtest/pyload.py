"""A load generator in Python for `flowserve bench gateway` where wrk is not installed:
`python -m flowserve.loadtest.pyload URL CLIENTS SECONDS STREAM MODEL` prints one JSON line.

It sends what wrk's script sends (`flowserve.loadtest.wrk`): distinct prompts over 8
shared prefixes, 64 output tokens, streamed or not, with an API key, from `CLIENTS`
keep-alive connections (aiohttp, one event loop, its own process) for `SECONDS`, and
reads every answer to its end. It is slower than wrk: one Python process spends far more
CPU per request than wrk's C, so against a fast target the generator, not the router, may
set the pace. It says how busy it was (`client_cpu_share`: its CPU seconds over the run's
wall seconds); near 1.0 it was the bottleneck, and the req/s measure it, not the router.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from typing import Any

import aiohttp
import numpy as np

SATURATED = 0.9  # the generator's CPU share of one core above which its figures are its own limit


def body(n: int, stream: bool, model: str) -> bytes:
    """Request n, as wrk's Lua script makes it."""
    k = n % 2048
    prefix = f"shared prefix {k % 8} " * 8
    return json.dumps({"model": model, "prompt": f"{prefix}question {k}", "max_tokens": 64,
                       "stream": stream}).encode()


async def load(url: str, clients: int, seconds: float, stream: bool, model: str) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    counter = 0
    headers = {"content-type": "application/json", "authorization": "Bearer bench"}
    timeout = aiohttp.ClientTimeout(total=10)

    async def client(session: aiohttp.ClientSession, until: float) -> None:
        nonlocal errors, counter
        while time.perf_counter() < until:
            counter += 1
            t0 = time.perf_counter()
            try:
                async with session.post(url, data=body(counter, stream, model), headers=headers) as r:
                    await r.read()
                    ok = 200 <= r.status < 400
            except (aiohttp.ClientError, TimeoutError):
                ok = False
            latencies.append(time.perf_counter() - t0)
            errors += not ok

    connector = aiohttp.TCPConnector(limit=clients)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start = time.perf_counter()
        await asyncio.gather(*(client(session, start + seconds) for _ in range(clients)))
        wall = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    lat = np.array(latencies or [0.0]) * 1000
    return {"requests": len(latencies), "seconds": wall, "errors": errors,
            "req_per_s": len(latencies) / wall if wall else 0.0, "p50_ms": float(np.percentile(lat, 50)),
            "p99_ms": float(np.percentile(lat, 99)), "client": "python",
            "client_cpu_share": cpu / wall if wall else 0.0}


def main() -> None:
    url, clients, seconds, stream, model = sys.argv[1:6]
    out = asyncio.run(load(url, int(clients), float(seconds), stream == "true", model))
    print("FLOWSERVE " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
