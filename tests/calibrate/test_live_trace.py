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
from flowserve.host.settings import serve_config

KEY = "sk-calibrate"
AUTH = {"authorization": f"Bearer {KEY}"}


def calibrate(trace: Path, tmp_path: Path) -> dict:
    """`flowserve calibrate --trace` of a recording on Preble's A6000, its JSON report."""
    out = tmp_path / "report.json"
    res = CliRunner().invoke(app, ["calibrate", "--trace", str(trace), "--cluster", "preble-a6000",
                                   "--json", str(out)])
    assert res.exit_code == 0, res.output
    return json.loads(out.read_text())


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
    report = calibrate(trace, tmp_path)
    assert report["queries"] == report["replayed"] == 2
    assert report["calls"] == {"plan": {"live": 2, "replay": 2}, "act": {"live": 2, "replay": 2}}
    assert report["live_latency_s"]["mean"] > 0 and report["replay_latency_s"]["mean"] > 0


def test_a_failed_query_is_recorded_with_the_calls_it_ran_and_replayed(tmp_path: Path) -> None:
    """An agent that gave up still loaded the engines: its calls are in the recording
    (`"failed"`: its kind), so the replay runs on as full a cluster as the live run did."""
    cfg = serve_config({"instances": [{"name": "sim", "gpu": "A6000", "model": "mistral-7b"}], "api_keys": [KEY],
                        "gateway": {"time_scale": 50.0, "record": str(tmp_path / "rec"),
                                    "workflows": {"faulty": {"app": "user_apps:Faulty"}}}}, "test")
    with BackgroundServer(create_app(cfg)) as srv:
        for fault in ("output", "none"):
            r = httpx.post(f"{srv.url}/v1/workflows/faulty", json={"input": {"fault": fault}}, headers=AUTH,
                           timeout=60)
            assert r.status_code == (500 if fault == "output" else 200), r.text
    [trace] = (tmp_path / "rec").glob("trace-*.jsonl")
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [line.get("failed") for line in lines] == ["app_error", None]
    assert [[c["step"] for c in line["calls"]] for line in lines] == [["only"], ["only"]]
    assert all(line["latency_s"] > 0 for line in lines)
    report = calibrate(trace, tmp_path)
    assert report["queries"] == report["replayed"] == 2
    assert report["calls"] == {"only": {"live": 2, "replay": 2}}
    assert report["failed_live"] == [{"query": 0, "reason": "app_error"}]
