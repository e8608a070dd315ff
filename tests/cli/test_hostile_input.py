"""Issue 9, CLI defects: each case ends with exit 2 and one line naming the problem (and
where a limit comes from), never a traceback, never exit 0 on nonsense."""

import math

import pytest
import yaml
from typer.testing import CliRunner

from flowserve.cli import app

runner = CliRunner()

GOOD_CLUSTER = {"instances": [{"name": "a", "gpu": "A100-80G", "model": "llama-3.1-8b"}]}
GOOD_DAG = {"kind": "dag", "rate": 1, "queries": 3, "nodes": [{"name": "p", "input": 800, "output": 60}]}
ARCH = {"params_b": 8.0, "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
        "max_context": 8192}


def instance(**kw):
    return {"instances": [{**GOOD_CLUSTER["instances"][0], **kw}]}


def dag(nodes=None, **kw):
    return {**GOOD_DAG, **({"nodes": nodes} if nodes else {}), **kw}


def simulate(tmp_path, cluster=GOOD_CLUSTER, workload=GOOD_DAG, *extra):
    paths = []
    for name, doc in (("cluster.yaml", cluster), ("workload.yaml", workload)):
        if isinstance(doc, str):  # a path
            paths.append(doc)
        elif isinstance(doc, bytes):
            (tmp_path / name).write_bytes(doc)
            paths.append(str(tmp_path / name))
        else:
            (tmp_path / name).write_text(yaml.safe_dump(doc))
            paths.append(str(tmp_path / name))
    return runner.invoke(app, ["simulate", "--cluster", paths[0], "--workload", paths[1], "--slo-scales", "1,2",
                               *extra])


def assert_one_line_exit_2(res, *phrases):
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit), res.exception  # no traceback
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, res.output
    assert lines[0].startswith("error: ")
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


CLUSTER_TEXT = yaml.safe_dump({"instances": [{"name": "café", "gpu": "A100-80G", "model": "llama-3.1-8b"}]},
                              allow_unicode=True)
DAG_TEXT = yaml.safe_dump(GOOD_DAG)


@pytest.mark.parametrize("encoding", ["latin-1", "utf-16"])
def test_a_cluster_file_that_is_not_utf8(tmp_path, encoding):
    res = simulate(tmp_path, CLUSTER_TEXT.encode(encoding))
    assert_one_line_exit_2(res, "cluster.yaml: not UTF-8 text", "save the file as UTF-8")


@pytest.mark.parametrize("encoding", ["latin-1", "utf-16"])
def test_a_workload_file_that_is_not_utf8(tmp_path, encoding):
    res = simulate(tmp_path, GOOD_CLUSTER, (DAG_TEXT + "workflow: café\n").encode(encoding))
    assert_one_line_exit_2(res, "workload.yaml: not UTF-8 text")


@pytest.mark.parametrize("encoding", ["latin-1", "utf-16"])
def test_a_jsonl_trace_that_is_not_utf8(tmp_path, encoding):
    trace = tmp_path / "t.jsonl"
    trace.write_bytes('{"id": 0, "arrival": 0, "workflow": "café", "steps": []}\n'.encode(encoding))
    res = simulate(tmp_path, GOOD_CLUSTER, str(trace))
    assert_one_line_exit_2(res, "t.jsonl: not UTF-8 text")


def test_a_utf16_file_names_its_byte_order_mark(tmp_path):
    res = simulate(tmp_path, CLUSTER_TEXT.encode("utf-16"))
    assert_one_line_exit_2(res, "UTF-16 byte-order mark")


def test_a_model_that_does_not_fit_the_gpu(tmp_path):
    res = simulate(tmp_path, instance(gpu="L4", model="llama-3.1-70b", tp=1))
    assert_one_line_exit_2(res, "llama-3.1-70b does not fit", "141.2 GB of weights", "raise tp")


def test_an_absurd_block_size(tmp_path):
    res = simulate(tmp_path, instance(block_size=10**9))
    assert_one_line_exit_2(res, "block_size", "above the limit of 256", "vLLM")


def test_a_huge_params_b(tmp_path):
    res = simulate(tmp_path, instance(model="custom", model_arch={**ARCH, "params_b": 1e9}))
    assert_one_line_exit_2(res, "params_b", "above the limit")
    # large but under the bound: the weights do not fit
    res = simulate(tmp_path, instance(model="custom", model_arch={**ARCH, "params_b": 5000.0}))
    assert_one_line_exit_2(res, "custom does not fit")


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_model_arch_with_inf_or_nan(tmp_path, value):
    res = simulate(tmp_path, instance(model="custom", model_arch={**ARCH, "params_b": value}))
    assert_one_line_exit_2(res, "model_arch.params_b", "finite number")


def test_a_dag_prompt_over_the_segment_limit(tmp_path):
    res = simulate(tmp_path, GOOD_CLUSTER, dag([{"name": "p", "input": 262_145, "output": 60}]))
    assert_one_line_exit_2(res, "nodes.0.input", "262,144", "graph/prompt.py")


def test_a_dag_prompt_drawn_near_the_limit_is_clamped(tmp_path):
    res = simulate(tmp_path, {"instances": [{"name": "a", "gpu": "H100", "model": "llama-3.1-8b", "tp": 8}]},
                   dag([{"name": "p", "input": 262_144, "output": 10}], sd_log=1.0, queries=4))
    assert res.exit_code == 0, res.output


def test_a_dag_output_of_ten_million(tmp_path):
    res = simulate(tmp_path, GOOD_CLUSTER, dag([{"name": "p", "input": 800, "output": 10_000_000}]))
    assert_one_line_exit_2(res, "nodes.0.output", "16,384", "max_tokens")


def test_a_negative_seed(tmp_path):
    assert_one_line_exit_2(simulate(tmp_path, GOOD_CLUSTER, dag(seed=-1)), "seed")
    assert_one_line_exit_2(simulate(tmp_path, GOOD_CLUSTER, GOOD_DAG, "--seed", "-5"), "seed")


def test_queries_ten_to_the_twelve(tmp_path):
    res = simulate(tmp_path, GOOD_CLUSTER, dag(queries=10**12))
    assert_one_line_exit_2(res, "queries", "limit of 1,000,000", "in memory")


def test_queries_true(tmp_path):
    assert_one_line_exit_2(simulate(tmp_path, GOOD_CLUSTER, dag(queries=True)), "queries", "integer")


@pytest.mark.parametrize("rate", [math.inf, math.nan])
def test_rate_inf(tmp_path, rate):
    assert_one_line_exit_2(simulate(tmp_path, GOOD_CLUSTER, dag(rate=rate)), "rate", "finite")


def test_tp_one_hundred_thousand(tmp_path):
    assert_one_line_exit_2(simulate(tmp_path, instance(tp=100_000)), "tp", "limit of 1,024")
    # within the bound, tp must still shard the model's attention heads (vLLM's rule)
    assert_one_line_exit_2(simulate(tmp_path, instance(tp=3)), "tp 3 does not divide", "32 attention heads")


@pytest.mark.parametrize("scales", ["nan", "1,inf", "-1", "x"])
def test_slo_scales_that_are_not_positive_finite(tmp_path, scales):
    res = simulate(tmp_path, GOOD_CLUSTER, GOOD_DAG, "--slo-scales", scales)
    assert_one_line_exit_2(res, "--slo-scales")


def test_a_tool_op_of_infinite_duration(tmp_path):
    nodes = [{"name": "p", "input": 800, "output": 60}, {"name": "t", "op": "x", "duration_s": math.inf, "deps": ["p"]}]
    assert_one_line_exit_2(simulate(tmp_path, GOOD_CLUSTER, dag(nodes)), "duration_s", "finite")
    nodes[1]["duration_s"] = 10**7
    assert_one_line_exit_2(simulate(tmp_path, GOOD_CLUSTER, dag(nodes)), "duration_s", "longer than a day")


def test_count_one_hundred_thousand(tmp_path):
    assert_one_line_exit_2(simulate(tmp_path, instance(count=100_000)), "count", "limit of 1,024", "dispatch")
    two = {"instances": [{**GOOD_CLUSTER["instances"][0], "count": 1000},
                         {**GOOD_CLUSTER["instances"][0], "name": "b", "count": 1000}]}
    assert_one_line_exit_2(simulate(tmp_path, two), "2,000 instances", "limit of 1,024")


def test_candidates_one_hundred_thousand(tmp_path):
    wl = {"kind": "text2sql", "rate": 1, "queries": 2, "candidates": 100_000}
    assert_one_line_exit_2(simulate(tmp_path, GOOD_CLUSTER, wl), "candidates", "limit of 64", "CHESS")


def test_a_prompt_that_fits_the_context_but_not_the_kv_cache_fails_alone(tmp_path):
    # 70B on 2×A100 holds ~41k KV tokens: the instance's context is what its KV holds
    cluster = instance(model="llama-3.1-70b", tp=2)
    res = simulate(tmp_path, cluster, dag([{"name": "p", "input": 50_000, "output": 10}], sd_log=0),
                   "--json", str(tmp_path / "s.json"))
    assert res.exit_code == 0, res.output
    summary = yaml.safe_load((tmp_path / "s.json").read_text())
    assert summary["failed"] == 3
    # prompt and output together longer than the KV cache: the output stops when it is full
    res = simulate(tmp_path, cluster, dag([{"name": "p", "input": 30_000, "output": 16_000}], sd_log=0),
                   "--json", str(tmp_path / "s.json"))
    assert res.exit_code == 0, res.output
    assert yaml.safe_load((tmp_path / "s.json").read_text())["completed"] == 3
