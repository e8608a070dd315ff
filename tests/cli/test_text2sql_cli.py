"""`flowserve text2sql eval` in-process and through a gateway (scripted engine), the
recorded trace, and `flowserve calibrate --trace T --cluster C` comparing it with its
replay in the simulator; bad input exits 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from scripted_engine import ScriptedEngine
from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import serve_config

runner = CliRunner()


def serve_yaml(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump({"instances": [{"name": "e", "gpu": "A100-80G", "model": "llama-3.1-8b",
                                                   "backend": "openai", "url": url}],
                                    "gateway": {"workflows": {"text2sql": {"max_rounds": 2}}}}))
    return path


def test_eval_in_process_reports_accuracy_stages_and_records_a_replayable_trace(tmp_path, engine) -> None:
    out, trace = tmp_path / "eval.json", tmp_path / "run.json"
    r = runner.invoke(app, ["text2sql", "eval", "--db", "chinook", "--questions", "chinook", "--limit", "4",
                            "--config", str(serve_yaml(tmp_path, engine.url)), "--json", str(out),
                            "--trace", str(trace)])
    assert r.exit_code == 0, r.output
    assert "execution accuracy 1.000 (4/4; failed 0)" in r.output
    s = json.loads(out.read_text())
    assert s["stages"]["generate_candidate"]["calls_per_query"] == 2.0
    assert s["stages"]["revise"]["calls_per_query"] == 1.0
    assert s["stages"]["evaluate"]["mean_call_latency_s"] > 0
    recorded = json.loads(trace.read_text())
    assert len(recorded) == 4 and all(e["latency_s"] > 0 for e in recorded)
    assert [c["step"] for c in recorded[0]["Text2SQLRequest"]][:2] == ["extract_keywords", "select_schema"]
    # the loop closed: the recorded live run replayed in the simulator and compared
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"instances": [{"name": "a", "gpu": "A100-80G", "model": "llama-3.1-8b"}]}))
    cmp_json = tmp_path / "cmp.json"
    r = runner.invoke(app, ["calibrate", "--trace", str(trace), "--cluster", str(cluster), "--json", str(cmp_json)])
    assert r.exit_code == 0, r.output
    cmp = json.loads(cmp_json.read_text())
    assert cmp["replayed"] == 4 and cmp["calls"]["generate_candidate"] == {"live": 8, "replay": 8}
    assert cmp["replay_latency_s"]["mean"] > 0 and cmp["per_query_rel_error"]["max"] >= 0


def test_eval_through_a_gateway(tmp_path, engine) -> None:
    cfg = serve_config({"instances": [{"name": "e", "gpu": "A100-80G", "model": "llama-3.1-8b",
                                       "backend": "openai", "url": engine.url}],
                        "gateway": {"workflows": {"text2sql": {"databases": {"chinook": "chinook"}}}}}, "test")
    with BackgroundServer(create_app(cfg)) as gw:
        r = runner.invoke(app, ["text2sql", "eval", "--db", "chinook", "--questions", "chinook", "--limit", "2",
                                "--gateway", gw.url])
    assert r.exit_code == 0, r.output
    assert "execution accuracy 1.000 (2/2; failed 0)" in r.output


def test_eval_counts_a_failed_query_with_its_reason(tmp_path) -> None:
    from text2sql_script import Text2SQLScript

    from flowserve.apps.text2sql.evaluate import load_questions

    qs = load_questions("chinook")[:2]
    script = Text2SQLScript({q.question: q.gold_sql for q in qs}, overrides={"select_schema": "NONE"})
    with ScriptedEngine(script) as eng:
        r = runner.invoke(app, ["text2sql", "eval", "--db", "chinook", "--questions", "chinook", "--limit", "2",
                                "--config", str(serve_yaml(tmp_path, eng.url))])
    assert r.exit_code == 0, r.output
    assert "execution accuracy 0.000 (0/2; failed 2)" in r.output
    assert "not correct ×2: text2sql: no table of database 'eval' can answer the question" in r.output


def test_bad_input_exits_2_with_one_line(tmp_path) -> None:
    cases = [
        (["--db", str(tmp_path / "none.sqlite"), "--questions", "chinook", "--gateway", "http://127.0.0.1:9"],
         "no file"),
        (["--db", "chinook", "--questions", str(tmp_path / "none.jsonl"), "--gateway", "http://127.0.0.1:9"],
         "cannot read questions"),
        (["--db", "chinook", "--questions", "chinook"], "exactly one of --config"),
    ]
    for args, msg in cases:
        r = runner.invoke(app, ["text2sql", "eval", *args])
        assert r.exit_code == 2 and msg in r.output, r.output
    r = runner.invoke(app, ["calibrate", "--trace", "chess-trace1", "--cluster", "hetero-1"])
    assert r.exit_code == 2 and "has no live measurements" in r.output


def test_simulate_runs_the_agent_workflow_with_modelled_answers(tmp_path) -> None:
    out = tmp_path / "sim.json"
    args = ["text2sql", "simulate", "--db", "chinook", "--questions", "chinook", "--cluster", "hetero-1",
            "--rate", "2", "--error-prob", "0", "--json", str(out)]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    s = json.loads(out.read_text())
    assert s["completed"] == s["queries"] >= 40
    assert s["calls_per_query"] == {"evaluate": 3.0, "extract_keywords": 1.0, "generate_candidate": 2.0,
                                    "generate_unit_test": 1.0, "select_schema": 1.0}
    r = runner.invoke(app, [*args[:-2], "--lengths-from", str(tmp_path / "none.json")])
    assert r.exit_code == 2 and "cannot read trace file" in r.output


def test_calibrate_replays_a_gateways_recorded_lines_in_arrival_order(tmp_path) -> None:
    """`flowserve serve --record` writes a query when it ends: here the second line arrived
    first. The replay runs them in arrival order and compares each with its own line."""
    calls = [{"step": "plan", "input_length": 300, "output_length": 20},
             {"step": "answer", "input_length": 400, "output_length": 30, "after": [0]}]
    lines = [{"id": 7, "arrival": 9.5, "latency_s": 40.0, "calls": calls},
             {"id": 3, "arrival": 1.0, "latency_s": 2.0, "calls": calls[:1]}]
    trace = tmp_path / "trace-x.jsonl"
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "cmp.json"
    r = runner.invoke(app, ["calibrate", "--trace", str(trace), "--cluster", "hetero-1", "--json", str(out)])
    assert r.exit_code == 0, r.output
    cmp = json.loads(out.read_text())
    assert cmp["replayed"] == 2 and cmp["live_latency_s"]["mean"] == 21.0
    assert cmp["calls"] == {"plan": {"live": 2, "replay": 2}, "answer": {"live": 1, "replay": 1}}
    del lines[1]["latency_s"]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    r = runner.invoke(app, ["calibrate", "--trace", str(trace), "--cluster", "hetero-1"])
    assert r.exit_code == 2 and "no live measurements" in r.output
