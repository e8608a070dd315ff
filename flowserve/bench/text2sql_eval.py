"""`flowserve text2sql eval`: the agent on a question set, in-process or through a gateway.

In-process (`config`): the serving YAML's instances (any OpenAI-compatible engine, or
simulated ones) behind the same gateway code `flowserve serve` runs, with the database
added to the `text2sql` workflow's settings. Through a gateway (`gateway_url`): POST
`/v1/workflows/text2sql` per question. Either way every answer's SQL is re-executed
here against the database and compared with the gold SQL (`apps/text2sql/evaluate.py`),
and the run is recorded in the published trace format when asked.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from flowserve.apps.text2sql.app import resolve_database
from flowserve.apps.text2sql.evaluate import Outcome, Question, execution_match
from flowserve.apps.text2sql.record import trace_entry
from flowserve.errors import ConfigError
from flowserve.host.settings import ServeConfig
from flowserve.sqlexec import WorkerPool

DB_NAME = "eval"


def _calls_by_stage(calls: Sequence[Mapping[str, Any]]) -> tuple[dict[str, int], dict[str, float]]:
    counts: dict[str, int] = {}
    secs: dict[str, float] = {}
    for c in calls:
        counts[c["stage"]] = counts.get(c["stage"], 0) + 1
        if c.get("latency_s") is not None:
            secs[c["stage"]] = secs.get(c["stage"], 0.0) + float(c["latency_s"])
    return counts, secs


def _outcome(q: Question, db: str, status: str, reason: str | None, latency: float, output: Mapping[str, Any],
             calls: Sequence[Mapping[str, Any]], pool: WorkerPool) -> Outcome:
    sql = str(output.get("sql") or "") if status == "completed" else ""
    correct, why = execution_match(db, sql, q.gold_sql, pool) if status == "completed" else (False, reason)
    counts, secs = _calls_by_stage(calls)
    return Outcome(q.id, q.difficulty, status, correct, latency, sql, why, counts, secs)


async def _bounded(questions: Sequence[Question], concurrency: int, one: Any) -> list[Any]:
    sem = asyncio.Semaphore(concurrency)
    t0 = time.monotonic()

    async def run(q: Question) -> Any:
        async with sem:
            return await one(q, time.monotonic() - t0)
    return list(await asyncio.gather(*(run(q) for q in questions)))


async def eval_in_process(config: ServeConfig, db: str, questions: Sequence[Question],
                          concurrency: int = 4) -> tuple[list[Outcome], list[dict[str, Any]]]:
    from flowserve.host.root import LiveHost
    from flowserve.host.served import app_ref

    workflows = dict(config.gateway.workflows)
    t2s = dict(workflows.get("text2sql", {}))
    t2s["databases"] = {DB_NAME: db}
    workflows["text2sql"] = t2s
    config = dataclasses.replace(config, gateway=config.gateway.model_copy(update={"workflows": workflows}))
    gw = LiveHost(config)
    path = gw.prepared["text2sql"]["catalogs"][DB_NAME].path
    await asyncio.to_thread(gw.prepared["text2sql"]["indexes"].warm)  # not in the first query's latency
    await gw.start()

    async def one(q: Question, arrival: float) -> tuple[Outcome, dict[str, Any]]:
        r = await gw.driver.run("text2sql", app_ref("text2sql", {"question": q.question, "database": DB_NAME}, None))
        calls = [{"stage": c.stage, "prompt_tokens": c.prompt_tokens, "output_tokens": c.output_tokens,
                  "latency_s": None if c.ready is None else c.finished - c.ready} for c in r.calls]
        out = await asyncio.to_thread(_outcome, q, path, r.status, r.reason, r.latency_s, r.output, calls,
                                      gw.driver.tools.sql_pool)
        return out, trace_entry(calls, question_id=q.id, status=r.status, arrival_s=arrival, latency_s=r.latency_s)

    try:
        pairs = await _bounded(questions, concurrency, one)
    finally:
        await gw.stop()
    return [p[0] for p in pairs], [p[1] for p in pairs]


async def eval_gateway(url: str, db: str, db_name: str, questions: Sequence[Question], api_key: str | None = None,
                       concurrency: int = 4, timeout_s: float = 600.0) -> tuple[list[Outcome], list[dict[str, Any]]]:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    # the answers' SQL is a model's output: it runs in worker processes
    pool = WorkerPool(min(concurrency, 4))
    async with httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers, timeout=timeout_s) as client:
        async def one(q: Question, arrival: float) -> tuple[Outcome, dict[str, Any]]:
            t = time.monotonic()
            try:
                resp = await client.post("/v1/workflows/text2sql",
                                         json={"input": {"question": q.question, "database": db_name}})
                body = resp.json()
            except (httpx.HTTPError, ValueError) as e:
                raise ConfigError(f"gateway {url}: {type(e).__name__}: {e}") from None
            if not isinstance(body, dict) or ("output" not in body and resp.status_code >= 400):
                msg = body.get("error", {}).get("message") if isinstance(body, dict) else body
                raise ConfigError(f"gateway {url}: HTTP {resp.status_code}: {msg}")
            status = str(body.get("status", "failed"))
            latency = float(body.get("latency_s") or time.monotonic() - t)
            calls = [{"stage": c["stage"], "prompt_tokens": c["prompt_tokens"], "output_tokens": c["output_tokens"]}
                     for c in body.get("calls", [])]
            out = await asyncio.to_thread(_outcome, q, db, status, body.get("reason"), latency,
                                          body.get("output") or {}, calls, pool)
            return out, trace_entry(calls, question_id=q.id, status=status, arrival_s=arrival, latency_s=latency)

        try:
            pairs = await _bounded(questions, concurrency, one)
        finally:
            pool.close()
    return [p[0] for p in pairs], [p[1] for p in pairs]


def database_file(db: str, cleanup: list[str]) -> str:
    """`chinook`, `builtin` or a path, as a local file the harness can read (gold SQL)."""
    path = resolve_database("eval", db, cleanup)
    if not Path(path).is_file():
        raise ConfigError(f"--db: no file {db!r}")
    return path
