import json

import pytest
from typer.testing import CliRunner

from flowserve.cli import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def test_simulate_writes_the_json_summary(tmp_path):
    out = tmp_path / "s.json"
    trace = tmp_path / "t.jsonl"
    r = run("simulate", "--cluster", "hetero-2", "--workload", "text2sql", "--dispatch", "least_load",
            "--queue", "fcfs", "--slo-scales", "1,2,4,100", "--seed", "5", "--set", "workload.queries=15",
            "--json", str(out), "--record-trace", str(trace))
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["queries"] == data["completed"] == 15
    assert data["slo_attainment"][-1] == {"scale": 100.0, "attainment": 1.0}
    assert "least_load+fcfs" in r.output
    # replaying the recorded trace gives the same numbers
    out2 = tmp_path / "s2.json"
    r = run("simulate", "--cluster", "hetero-2", "--workload", str(trace), "--dispatch", "least_load",
            "--slo-scales", "1,2,4,100", "--json", str(out2))
    assert r.exit_code == 0, r.output
    assert json.loads(out2.read_text())["latency_s"] == data["latency_s"]


def test_cluster_yaml(tmp_path):
    c = tmp_path / "c.yaml"
    c.write_text("instances:\n  - {name: h, gpu: h100, model: Llama-3.1-8B, tp: 1, count: 2}\n")
    r = run("simulate", "--cluster", str(c), "--set", "workload.queries=5", "--slo-scales", "2")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize(("yaml_text", "args", "message"), [
    ("instances:\n  - {name: x, gpu: V100, model: llama-2-7b}\n", (), "unknown GPU 'V100'"),
    ("instances:\n  - {name: x, gpu: A100-80G, model: gpt-9}\n", (), "unknown model 'gpt-9'"),
    ("instances:\n  - {name: x, gpu: A100-80G}\n", (), "model is required unless the instance has a profile"),
    ("instances: []\n", (), "instances: List should have at least 1 item"),
    ("instances:\n  - {name: x, gpu: A100-80G, model: llama-2-7b, tpp: 2}\n", (), "tpp: unknown field"),
    ("instances: [\n", (), "not valid YAML"),
    (None, ("--set", "workload.rate=0"), "rate: Input should be greater than 0"),
    (None, ("--set", "workload.rate=-2"), "rate: Input should be greater than 0"),
    (None, ("--dispatch", "magic"), "unknown dispatch policy 'magic'"),
    (None, ("--slo-scales", "1,x"), "--slo-scales"),
    (None, ("--set", "oops"), "expected section.name=value"),
])
def test_bad_input_exits_2_with_a_message(tmp_path, yaml_text, args, message):
    cluster = "hetero-1"
    if yaml_text is not None:
        p = tmp_path / "c.yaml"
        p.write_text(yaml_text)
        cluster = str(p)
    r = run("simulate", "--cluster", cluster, "--set", "workload.queries=5", *args)
    assert r.exit_code == 2, r.output
    assert message in r.output
    assert "Traceback" not in r.output


def test_prompts_longer_than_the_context_fail_their_queries_and_are_counted(tmp_path):
    c = tmp_path / "c.yaml"
    c.write_text("instances:\n  - {name: x, gpu: A100-80G, model: llama-2-7b}\n")  # 4k context
    out = tmp_path / "r.json"
    r = run("simulate", "--cluster", str(c), "--set", "workload.queries=5", "--json", str(out))
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    # text2sql candidates (~10k tokens) never fit 4k: each query fails alone, with its reason
    assert data["failed"] == 5 and data["completed"] == 0
    (reason,) = data["failure_reasons"]
    assert "exceeds the model's context of N tokens" in reason and data["failure_reasons"][reason] == 5


def test_cyclic_workflow_exits_2(tmp_path):
    w = tmp_path / "w.yaml"
    w.write_text("kind: dag\nrate: 1\nqueries: 3\nnodes:\n  - {name: a, input: 50, deps: [b]}\n"
                 "  - {name: b, input: 50, deps: [a]}\n")
    r = run("simulate", "--workload", str(w))
    assert r.exit_code == 2
    assert "cycle through nodes ['a', 'b']" in r.output


def test_demo_runs_small(tmp_path):
    r = run("demo", "--out", str(tmp_path), "--queries", "12")
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "demo.json").read_text())
    assert set(data["results"]) >= {"round_robin+fcfs", "least_load+fcfs"}
    assert (tmp_path / "demo-attainment.png").stat().st_size > 1000
    # stderr is no terminal here: a line per finished policy instead of the progress bar
    n = len(data["results"])
    progress = [line for line in r.output.splitlines() if line.startswith("[") and f"/{n}] " in line]
    assert [line.split("]")[0] for line in progress] == [f"[{i}/{n}" for i in range(1, n + 1)]
    # two processes simulate the policies, the deadline-aware ones first; those run a
    # bisection of the 16 SLO scales, not all 16 (tests/sim/test_evaluate.py: same minima)
    assert any("round_robin+fcfs: 1 simulation in" in line for line in progress)
    [aware] = [line for line in progress if "flowserve+flowserve: " in line]
    assert 2 <= int(aware.split("flowserve+flowserve: ")[1].split()[0]) <= 9
    # the table explains itself: a titled report, best first, the winner marked, a legend
    md = (tmp_path / "demo.md").read_text()
    assert md.startswith("# Text-to-SQL")
    assert "lower is better" in md and "higher is better" in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and "+" in line]
    assert rows[0].startswith(f"| {data['best']} ★ |")
    assert [r.split(" | ")[0].strip("| ★") for r in rows] == data["ranking"]
    assert sum("★" in r for r in rows) == 1


def test_calibrate_and_bench_core(tmp_path):
    r = run("calibrate", "--queries", "200", "--json", str(tmp_path / "c.json"))
    assert r.exit_code == 0, r.output
    report = json.loads((tmp_path / "c.json").read_text())
    assert abs(report["financial vs chess-trace1"]["calls_per_query"]["rel_err"]) < 0.1
    r = run("bench", "core", "--calls", "400", "--json", str(tmp_path / "b.json"))
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "b.json").read_text())["results"]["round_robin+fcfs"]["calls"] > 300


def test_bench_router_small(tmp_path):
    out = tmp_path / "r.json"
    r = run("bench", "router", "--nodes", "3000", "--decisions", "300", "--json", str(out))
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["tree_nodes"] >= 3000 * 0.5
    assert data["choose_per_s"] > 0
