"""A gateway killed with SIGKILL in the middle of a batch (`flowserve serve` as a real
process, its state in SQLite) and started again: the batch resumes and completes, no
line is lost, and none that had its result before the kill runs again — the restarted
gateway runs exactly the lines that had none."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx
import orjson
import yaml
from live_support import MODEL, poll_until

from flowserve.batches.sqlite_store import SqliteBatches
from flowserve.engines.llamacpp_server import free_port
from flowserve.loadtest.procs import served

KEY = "sk-restart"
AUTH = {"authorization": f"Bearer {KEY}"}
CLI = [sys.executable, "-c", "from flowserve.cli import app; app()"]
LINES = 120


def queries_run(url: str) -> int:
    """Queries this gateway process ended (its Prometheus counter, every workflow and outcome)."""
    text = httpx.get(f"{url}/metrics").text
    return int(sum(float(row.rsplit(" ", 1)[1]) for row in text.splitlines()
                   if row.startswith("flowserve_queries_total{")))


def results_at(folder: Path, batch_id: str) -> dict[int, str | None]:
    """Line → the request id of its recorded answer, read from the dead gateway's database."""
    async def read() -> dict[int, str | None]:
        store = SqliteBatches(folder)
        try:
            return {r.line: r.request_id for r in await store.results(batch_id)}
        finally:
            await store.aclose()
    return asyncio.run(read())


def test_a_gateway_killed_mid_batch_resumes_it_and_runs_no_line_twice(tmp_path: Path) -> None:
    folder = tmp_path / "batches"
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(yaml.safe_dump({
        "instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}], "api_keys": [KEY],
        # 8 requests out at a time, simulated 4x faster than real time: the batch takes about a second,
        # long enough to be killed in its middle
        "gateway": {"time_scale": 4.0, "queue": "flowserve", "dispatch": "flowserve",
                    "batches": {"dir": str(folder), "max_in_flight": 8}}}))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = [*CLI, "serve", "--config", str(cfg), "--port", str(port), "--log-level", "warning"]
    data = b"".join(orjson.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions",
                                  "body": {"model": MODEL, "prompt": f"line {i} of the batch", "max_tokens": 24}})
                    + b"\n" for i in range(LINES))
    with served(args, f"{url}/health", tmp_path / "first.log") as first:
        up = httpx.post(f"{url}/v1/files", headers=AUTH, files={"file": ("in.jsonl", data)},
                        data={"purpose": "batch"}).json()
        batch = httpx.post(f"{url}/v1/batches", headers=AUTH, json={
            "input_file_id": up["id"], "endpoint": "/v1/completions", "completion_window": "24h"}).json()

        def counts() -> dict[str, int]:
            return httpx.get(f"{url}/v1/batches/{batch['id']}", headers=AUTH).json()["request_counts"]
        poll_until(lambda: counts()["completed"] >= LINES // 4, 60, "a quarter of the batch done", every_s=0.02)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
    before = results_at(folder, batch["id"])
    assert LINES // 4 <= len(before) < LINES  # killed mid-batch
    with served(args, f"{url}/health", tmp_path / "second.log"):
        done = poll_until(lambda: (b := httpx.get(f"{url}/v1/batches/{batch['id']}", headers=AUTH).json())
                          ["status"] == "completed" and b, 60, "the batch completed after the restart", every_s=0.05)
        assert done["request_counts"] == {"total": LINES, "completed": LINES, "failed": 0}
        assert queries_run(url) == LINES - len(before)  # exactly the lines without a result ran again
        out = [orjson.loads(x) for x in
               httpx.get(f"{url}/v1/files/{done['output_file_id']}/content", headers=AUTH).content.splitlines()]
    assert sorted(o["custom_id"] for o in out) == sorted(f"r{i}" for i in range(LINES))  # each line once
    by_line = {int(o["custom_id"][1:]) + 1: o["response"]["request_id"] for o in out}
    assert all(by_line[line] == rid for line, rid in before.items())  # answered before the kill: kept, not re-run
