"""A live run compared with its replay (`flowserve calibrate --trace T --cluster C`) reads
the gateway's own recordings (issue 35 item 16: `JSONDecodeError: Extra data`)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.gateway.settings import serve_config

KEY = "sk-calibrate"
AUTH = {"authorization": f"Bearer {KEY}"}


def test_calibrate_compares_a_gateway_recording_with_its_replay(tmp_path: Path) -> None:
    cfg = serve_config({"instances": [{"name": "sim", "gpu": "A6000", "model": "mistral-7b"}], "api_keys": [KEY],
                        "gateway": {"time_scale": 50.0, "record": str(tmp_path / "rec")}}, "test")
    with BackgroundServer(create_app(cfg)) as srv:
        for program in ("first", "second"):
            for step in ("plan", "act"):
                r = httpx.post(f"{srv.url}/v1/completions", json={"model": "mistral-7b", "prompt": f"{step} it",
                                                                   "max_tokens": 3},
                               headers={**AUTH, "x-flowserve-program": program, "x-flowserve-stage": step})
                assert r.status_code == 200, r.text
            summary = httpx.delete(f"{srv.url}/v1/programs/{program}", headers=AUTH).json()
            assert summary["calls"] == 2
    [trace] = (tmp_path / "rec").glob("trace-*.jsonl")
    out = tmp_path / "report.json"
    res = CliRunner().invoke(app, ["calibrate", "--trace", str(trace), "--cluster", "preble-a6000",
                                   "--json", str(out)])
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    assert report["queries"] == report["replayed"] == 2
    assert report["calls"] == {"plan": {"live": 2, "replay": 2}, "act": {"live": 2, "replay": 2}}
    assert report["live_latency_s"]["mean"] > 0 and report["replay_latency_s"]["mean"] > 0
