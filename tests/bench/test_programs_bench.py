"""`flowserve bench programs`: its formulas by hand, its goals and report on made-up rows,
and its live client playing programs through a gateway on simulated engines."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from live_support import MODEL

from flowserve.bench.programs import goals, near_saturation, report, throughput_at
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import serve_config
from flowserve.loadtest import program_client
from flowserve.workloads.program_trace import query_json
from flowserve.workloads.programs import ProgramShape, program_traces


def test_throughput_at_equal_p95_by_hand():
    rates = [0.5, 1.0, 1.5]
    assert throughput_at(rates, [50, 100, 300], 200) == (1.25, False)  # 1.0 + 0.5 × (200 − 100) / 200
    assert throughput_at(rates, [50, 100, 150], 200) == (1.5, True)     # never reached: at least the last rate
    assert throughput_at(rates, [250, 300, 400], 200) == (0.0, False)   # already above at the lightest


def row(mean: float, attainment: float) -> dict:
    return {"mean_s": mean, "p95_s": 3 * mean, "attainment": attainment, "hit_rate": 0.8, "utilisation": 0.7}


def test_near_saturation_and_the_goals_on_made_up_rows():
    rows = {0.5: {"round_robin+fcfs": row(40, 1.0), "llmd": row(30, 1.0), "flowserve": row(29, 1.0)},
            1.0: {"round_robin+fcfs": row(120, 0.5), "llmd": row(60, 0.85), "flowserve": row(55, 0.92)},
            1.5: {"round_robin+fcfs": row(300, 0.2), "llmd": row(150, 0.6), "flowserve": row(140, 0.8)}}
    assert near_saturation(rows) == 1.0  # the best still meets 90% there, not at 1.5
    sim = {"near_saturation": 1.0, "rows": {str(r): v for r, v in rows.items()}, "rates": [0.5, 1.0, 1.5],
           "p95_target_s": 174.0, "throughput": {n: {"rate": 1.0, "at_least": False} for n in rows[0.5]}}
    live = {"ratio": 2.0, "sim_ratio": 120 / 55, "contestants": {"round_robin+fcfs": {**row(110, 0.5), "errors": 0},
                                                                 "flowserve": {**row(55, 0.9), "errors": 0}},
            "loadavg": [1.0, 1.0, 1.0], "time_scale": 5.0, "client_cpu_share": 0.1}
    got = {g["goal"].split(" (")[0]: (g["value"], g["met"]) for g in goals(sim, live)}
    assert got["flowserve ≥ 2× mean program latency vs round_robin+fcfs near saturation"] == (2.18, True)
    assert got["flowserve ≥ the best other contestant"] == (1.091, True)
    assert got["flowserve ≥ 2× mean program latency vs round_robin+fcfs, live"] == (2.0, True)
    err = next(v for k, v in got.items() if k.startswith("the simulator predicts"))
    assert err == ("9.1%", True)  # |2.1818 / 2.0 − 1|
    text = report(sim, live)
    assert "## simulated, 1.0 programs/s (near saturation)" in text and "| flowserve | 55 | 165 | 92% |" in text


@pytest.fixture
def gateway():
    cfg = serve_config({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}],
                        "gateway": {"time_scale": 200.0, "dispatch": "flowserve", "queue": "flowserve"}}, "t")
    with BackgroundServer(create_app(cfg)) as srv:
        yield srv.url


def test_the_live_client_plays_each_program_through_the_gateway(gateway: str, tmp_path: Path):
    shape = ProgramShape(system_tokens=200, user_tokens=50, tool_result_tokens=50, output_tokens=8, tool_s=0.5)
    traced = program_traces(3, 2.0, 1, shape)
    path = tmp_path / "programs.jsonl"
    path.write_text("".join(json.dumps(query_json(q)) + "\n" for q in traced))
    out = asyncio.run(program_client.main(gateway, str(path), 200.0))
    assert [p["program"] for p in out["programs"]] == ["p0", "p1", "p2"]
    for p, q in zip(out["programs"], traced, strict=True):
        assert p["errors"] == [] and p["summary"]["calls"] == len(q.calls)
        assert p["summary"]["output_tokens"] == sum(c.output_length for c in q.calls)  # exact lengths
        assert p["latency_s"] >= sum(c.gap_s for c in q.calls if c.thread == "main")  # tool time is waited


def test_the_live_client_without_headers_sends_plain_completions(gateway: str, tmp_path: Path):
    shape = ProgramShape(system_tokens=200, user_tokens=50, tool_result_tokens=50, output_tokens=8, tool_s=0.5)
    traced = program_traces(2, 2.0, 2, shape)
    path = tmp_path / "programs.jsonl"
    path.write_text("".join(json.dumps(query_json(q)) + "\n" for q in traced))
    out = asyncio.run(program_client.main(gateway, str(path), 200.0, headers=False))
    for p, q in zip(out["programs"], traced, strict=True):
        assert p["errors"] == [] and p["summary"] == {}  # no program to end: the gateway saw single calls
        assert p["latency_s"] >= sum(c.gap_s for c in q.calls if c.thread == "main")
