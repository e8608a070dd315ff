"""`flowserve serve` and `flowserve validate` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from live_support import tiny_profile
from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.engines.llamacpp_server import LlamaServer, free_port
from flowserve.engines.tinymodel import TinyModel
from flowserve.workloads.shared_prefix import shared_prefix_workload
from flowserve.workloads.trace import write_trace


def one_line_exit_2(args: list[str], needle: str) -> None:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    flat = " ".join(res.output.split())  # the console wraps long lines
    assert needle in flat and flat.count("error:") == 1 and "Traceback" not in flat, res.output


def test_serve_rejects_bad_configuration_in_one_line(tmp_path: Path) -> None:
    one_line_exit_2(["serve", "--config", str(tmp_path / "missing.yaml")], "cannot read")
    cfg = tmp_path / "c.yaml"
    inst = {"name": "a", "gpu": "A100-80G", "model": "llama-3.1-8b"}
    cfg.write_text(yaml.safe_dump({"instances": [inst], "gateway": {"dispatch": "fastest"}}))
    one_line_exit_2(["serve", "--config", str(cfg)], "unknown dispatch policy 'fastest'")
    cfg.write_text(yaml.safe_dump({"instances": [inst], "gateway": {"workflows": {"text2sql": {
        "databases": {"hr": str(tmp_path / "nope.sqlite")}}}}}))
    one_line_exit_2(["serve", "--config", str(cfg)], "no file")
    cfg.write_text(yaml.safe_dump({"instances": [inst], "gateway": {"workflows": {"rag": {}}}}))
    one_line_exit_2(["serve", "--config", str(cfg)], "no workflow ['rag']")


@pytest.mark.real_engine
def test_validate_replays_a_workload_on_llama_server_and_in_the_simulator(
        llama_server: LlamaServer, tiny_model: TinyModel, tmp_path: Path) -> None:
    profile = tiny_profile(tmp_path / "tiny.yaml", tiny_model, slots=2)
    wl = shared_prefix_workload(6, 4.0, prefixes=2, prefix_tokens=300, suffix_tokens=20, output_tokens=8, seed=3)
    trace = tmp_path / "w.jsonl"
    write_trace(trace, wl.queries)
    out = tmp_path / "v.json"
    res = CliRunner().invoke(app, ["validate", "--url", llama_server.base_url, "--profile", str(profile),
                                   "--workload", str(trace), "--seed", "41", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "latency error: mean" in res.output and "token hit rate" in res.output
    report = json.loads(out.read_text())
    assert report["queries"] == report["compared"] == 6 and report["failed_live"] == []
    err = report["latency_error_pct"]
    assert 0 <= err["p50"] <= err["p90"] <= err["max"]
    hit = report["token_hit_rate"]
    assert 0 < hit["live"] < 1 and 0 < hit["sim"] < 1  # both saw the shared prefixes
    assert [q["query"] for q in report["per_query"]] == list(range(6))


def test_validate_against_a_closed_port_is_one_line_exit_2(tiny_model: TinyModel, tmp_path: Path) -> None:
    profile = tiny_profile(tmp_path / "tiny.yaml", tiny_model, slots=2)
    one_line_exit_2(["validate", "--url", f"http://127.0.0.1:{free_port()}", "--profile", str(profile),
                     "--workload", "text2sql", "--set", "workload.queries=2"], "error")
