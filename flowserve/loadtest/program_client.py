"""The live client of `flowserve bench programs`, in its own process so its CPU is not the
gateway's: `python -m flowserve.loadtest.program_client URL TRACES.jsonl TIME_SCALE OUT.json [--no-headers]`.

It plays each traced program (`flowserve.workloads.program_trace`) as the application
would: at its arrival it starts; each call waits for the calls it follows, then for its
tool gap, and is sent as a completion with the program's headers (`x-flowserve-program`,
`-stage`, `-thread`, and `x-slo-ms` on the first call); the prompt is its segments as
token ids (`TokenMaterializer`), the answer exactly its recorded length. Times in the
trace are simulated seconds; the client runs `TIME_SCALE` times faster, like the
gateway's simulated engines. When its last call is answered the program is deleted.
With `--no-headers` it sends the same calls as plain completions (no program headers, no
SLO): the gateway sees each call alone, as it would from a client that says nothing.
Writes one JSON object: per program its latency (simulated seconds), deadline and
errors, and the client's own busy time (a load generator must not be the bottleneck).
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from typing import Any

import httpx
import numpy as np
import orjson

from flowserve.tokenize.segments import TokenMaterializer
from flowserve.workloads.agent_trace import read_agent_trace
from flowserve.workloads.program_trace import TracedQuery

MODEL = "llama-3.1-8b"
VOCAB = 32_000


async def play(http: httpx.AsyncClient, pid: str, q: TracedQuery, scale: float, start: float,
               tokens: TokenMaterializer, headers: bool = True) -> dict[str, Any]:
    await asyncio.sleep(max(0.0, start + (q.arrival or 0.0) / scale - time.perf_counter()))
    began = time.perf_counter()
    done = [asyncio.Event() for _ in q.calls]
    errors: list[str] = []

    async def one(i: int) -> None:
        c = q.calls[i]
        after = c.after if c.after is not None else ((i - 1,) if i else ())
        for j in after:
            await done[j].wait()
        if c.gap_s:
            await asyncio.sleep(c.gap_s / scale)
        named = {"x-flowserve-program": pid, "x-flowserve-stage": c.step, "x-flowserve-thread": c.thread or "main"}
        if i == 0 and q.deadline_s is not None:
            named["x-slo-ms"] = f"{q.deadline_s / scale * 1000:.3f}"
        prompt = np.concatenate([tokens.run(seg) for seg in c.prompt or ()])
        body = orjson.dumps({"model": MODEL, "prompt": prompt, "max_tokens": max(c.output_length, 1)},
                            option=orjson.OPT_SERIALIZE_NUMPY)
        try:
            r = await http.post("/v1/completions", content=body,
                                headers={**(named if headers else {}), "content-type": "application/json"})
            if r.status_code != 200:
                errors.append(f"{r.status_code}: {r.text[:200]}")
        except httpx.HTTPError as e:
            errors.append(f"{type(e).__name__}: {e}")
        done[i].set()

    await asyncio.gather(*(one(i) for i in range(len(q.calls))))
    end = time.perf_counter()
    summary: dict[str, Any] = {}
    if headers:  # without them the gateway saw single calls: there is no program to end
        try:
            summary = (await http.delete(f"/v1/programs/{pid}")).json()
        except (httpx.HTTPError, ValueError) as e:
            summary = {"error": str(e)}
    latency = (end - start) * scale - (q.arrival or 0.0)
    return {"program": pid, "arrival": q.arrival, "latency_s": latency, "late_start_s": (began - start) * scale
            - (q.arrival or 0.0), "deadline_s": q.deadline_s, "met": None if q.deadline_s is None
            else latency <= q.deadline_s, "errors": errors, "summary": summary}


async def main(url: str, traces: str, scale: float, headers: bool = True) -> dict[str, Any]:
    programs = read_agent_trace(traces).traced
    tokens = TokenMaterializer(VOCAB)
    # idle connections are dropped before the server's keep-alive timeout (uvicorn: 5 s) can
    # close one under a request being sent on it
    limits = httpx.Limits(max_connections=2048, max_keepalive_connections=2048, keepalive_expiry=2.0)
    cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=httpx.Timeout(600.0)) as http:
        start = time.perf_counter() + 0.5
        results = await asyncio.gather(*(play(http, f"p{i}", q, scale, start, tokens, headers)
                                         for i, q in enumerate(programs)))
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.perf_counter() - wall0
    return {"programs": results, "wall_s": wall,
            "client_cpu_share": (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) / wall}


if __name__ == "__main__":
    url, traces, scale, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    data = asyncio.run(main(url, traces, scale, headers="--no-headers" not in sys.argv[5:]))
    with open(out, "w") as f:
        json.dump(data, f)
