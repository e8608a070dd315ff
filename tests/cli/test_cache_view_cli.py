"""`flowserve simulate --cache-view`: one workload under the engines' events and under the estimate."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.workloads.shared_prefix import shared_prefix_workload
from flowserve.workloads.trace import write_trace

runner = CliRunner()


def test_the_two_views_of_one_workload_side_by_side(tmp_path: Path) -> None:
    trace = tmp_path / "pressure.jsonl"  # 24 shared 6,000-token prefixes on two L4s: more than their KV holds
    write_trace(trace, shared_prefix_workload(120, 2.0, prefixes=24, prefix_tokens=6000, suffix_tokens=600,
                                              output_tokens=50, seed=1).queries)
    cluster = tmp_path / "c.yaml"
    cluster.write_text("instances:\n  - {name: l4-0, gpu: L4, model: mistral-7b}\n"
                       "  - {name: l4-1, gpu: L4, model: mistral-7b}\n")
    out = {}
    for view in ("precise", "estimated", None):
        path = tmp_path / f"{view}.json"
        r = runner.invoke(app, ["simulate", "--cluster", str(cluster), "--workload", str(trace), "--dispatch",
                                "prefix_affinity", "--slo-scales", "4", "--set", "engine.gpu_memory_utilization=0.8",
                                "--json", str(path),
                                *(["--cache-view", view] if view else [])])
        assert r.exit_code == 0, r.output
        out[view] = json.loads(path.read_text())
        assert f"cache view {view or 'configured'}: TTFT p90" in r.output
    assert out["precise"]["cache_view"] == "precise" and out[None]["cache_view"] == "configured"
    assert out["precise"]["completed"] == out["estimated"]["completed"] == 120
    # the views route differently under pressure; no kv_events in the file: the default is the estimate
    assert out["precise"]["call_ttft_s"] != out["estimated"]["call_ttft_s"]
    assert out[None]["call_ttft_s"] == out["estimated"]["call_ttft_s"]


def test_an_unknown_view_is_refused() -> None:
    r = runner.invoke(app, ["simulate", "--cache-view", "exact"])
    assert r.exit_code == 2 and "--cache-view: expected precise, estimated or engine" in r.output
