"""Fuzz: loading cluster files, workload files and JSONL traces (issue 9, item 2).

Property: a `FlowserveError` (the CLI's exit 2 with one line) or a valid result; never any
other exception. Inputs: raw bytes in several encodings, YAML shapes (wrong types, raw
scalars, tags, nesting), numbers including inf, nan, negatives and huge values. Every
test is derandomized (a fixed seed) and sized to stay fast.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowserve.config import load_cluster
from flowserve.errors import FlowserveError
from flowserve.graph.plan import DagPlan
from flowserve.sim.run import PolicySpec, simulate
from flowserve.workloads import load_workload
from flowserve.workloads.trace import query_to_json, read_trace

# 1,100 generated files in all (cluster 400, workload 400, trace 300), about 20 s.
FUZZ = settings(max_examples=400, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

NUMBERS = st.one_of(
    st.integers(-3, 40),
    st.sampled_from([0, -1, 2**31, 2**63, 2**64, 10**12, 10**30, -(10**30)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.inf, -math.inf, math.nan, 1e308, -0.0, 0.5, 1e-300]),
)
SCALARS = st.one_of(NUMBERS, st.booleans(), st.none(), st.text(max_size=8),
                    st.sampled_from(["A100-80G", "llama-3.1-8b", "poisson", "gamma", "dag", "text2sql"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=6)
# YAML text that safe_dump never writes: raw scalars, tags, anchors, deep nesting.
RAW = st.sampled_from([".inf", "-.inf", ".nan", "1e999", "1.0e999", "-1", "0x1F", "0o17", "1_000", "~", "true",
                       "yes", "[1, 2]", "{a: 1}", "!!binary aGk=", "!!binary x", "!!float abc", "2001-13-99",
                       "2001-01-01", "!!timestamp 2020-99-99", "&a [*a]", "*undefined", "!!python/object:os.system",
                       "'unterminated", "\"\\ud800\"", "[" * 300 + "]" * 300, "{" * 50, "- a\n- b", "|\n  text"])

CLUSTER_BASE = {"instances": [{"name": "a", "gpu": "A100-80G", "model": "llama-3.1-8b", "tp": 1}]}
INSTANCE_KEYS = ["name", "gpu", "model", "tp", "count", "block_size", "max_num_seqs", "token_budget",
                 "gpu_memory_utilization", "max_inflight", "prefix_caching", "backend", "model_arch", "profile",
                 "unknown"]
ARCH = {"params_b": 8.0, "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
        "max_context": 8192}
WORKLOAD_BASES = [
    {"kind": "dag", "rate": 1.0, "queries": 3, "nodes": [
        {"name": "p", "input": 300, "output": 20, "shared": 100},
        {"name": "t", "op": "search", "duration_s": 0.2, "deps": ["p"]},
        {"name": "a", "input": 500, "output": 30, "deps": ["p", "t"]}]},
    {"kind": "text2sql", "rate": 0.5, "queries": 3, "candidates": 2, "max_rounds": 3},
    {"kind": "tool_use", "rate": 2.0, "queries": 4},
    {"kind": "mixed", "rate": 2.0, "queries": 4},
    {"kind": "programming", "rate": 1.0, "queries": 2, "samples": 2},
    {"kind": "chess_trace", "file": "chess-financial", "rate": 1.0, "queries": 3},
]
WORKLOAD_KEYS = ["kind", "rate", "queries", "seed", "arrival", "cv", "candidates", "max_rounds", "exec_mean_s",
                 "error_prob", "trace", "file", "sd_log", "workflow", "nodes", "max_prompt", "active", "tools",
                 "zipf", "samples", "kinds", "unknown"]
NODE_KEYS = ["name", "input", "output", "shared", "op", "duration_s", "deps", "stage", "unknown"]


def encode(text: str, how: str) -> bytes:
    if how == "utf-8":
        return text.encode("utf-8", "surrogatepass")
    return text.encode(how, "replace")


@st.composite
def file_bytes(draw: Any, doc: Any) -> bytes:
    """A document as a file: YAML with optional raw lines, in some encoding, or noise."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.binary(max_size=64))
    text = yaml.safe_dump(doc, allow_unicode=True)
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(["rate", "queries", "seed", "instances", "nodes", "kind", "x"]))
        text += f"{key}: {draw(RAW)}\n"
    return encode(text, draw(st.sampled_from(["utf-8"] * 6 + ["utf-16", "latin-1", "utf-32"])))


def mutate(draw: Any, doc: dict[str, Any], keys: list[str]) -> None:
    for _ in range(draw(st.integers(0, 3))):
        doc[draw(st.sampled_from(keys))] = draw(VALUES)


@st.composite
def cluster_docs(draw: Any) -> bytes:
    inst = dict(CLUSTER_BASE["instances"][0])
    mutate(draw, inst, INSTANCE_KEYS)
    if draw(st.booleans()):
        arch = dict(ARCH)
        mutate(draw, arch, [*ARCH, "dtype_bytes", "unknown"])
        inst["model_arch"], inst["model"] = arch, draw(st.sampled_from(["custom", "llama-3.1-8b"]))
    doc: Any = {"instances": draw(st.sampled_from([[inst], [inst, {**inst, "name": "b"}], inst, []]))}
    if draw(st.integers(0, 9)) == 0:
        doc = draw(VALUES)
    return draw(file_bytes(doc))


@st.composite
def workload_docs(draw: Any) -> bytes:
    doc = json.loads(json.dumps(draw(st.sampled_from(WORKLOAD_BASES))))
    mutate(draw, doc, WORKLOAD_KEYS)
    if isinstance(doc.get("nodes"), list) and doc["nodes"] and draw(st.booleans()):
        node = doc["nodes"][draw(st.integers(0, len(doc["nodes"]) - 1))]
        if isinstance(node, dict):
            mutate(draw, node, NODE_KEYS)
    if draw(st.integers(0, 9)) == 0:
        doc = draw(VALUES)
    return draw(file_bytes(doc))


def clean_or_valid(fn: Any) -> Any:
    try:
        return fn()
    except FlowserveError as e:
        assert str(e).strip(), "an error must name the problem"
        return None


def _small(workload: Any) -> bool:
    return workload is None or len(workload.queries) <= 40


@FUZZ
@given(data=cluster_docs())
def test_cluster_files_load_or_fail_cleanly(tmp_path_factory: Any, data: bytes) -> None:
    path = tmp_path_factory.getbasetemp() / "fuzz-cluster.yaml"
    path.write_bytes(data)
    specs = clean_or_valid(lambda: load_cluster(str(path)))
    if specs is not None:
        assert specs and all(s.tp >= 1 for s in specs)


@FUZZ
@given(data=workload_docs())
def test_workload_files_load_or_fail_cleanly(tmp_path_factory: Any, data: bytes) -> None:
    path = tmp_path_factory.getbasetemp() / "fuzz-workload.yaml"
    path.write_bytes(data)
    wl = clean_or_valid(lambda: load_workload(str(path)))
    assert _small(wl)
    if wl is not None:
        assert all(math.isfinite(q.arrival) and q.arrival >= 0 for q in wl.queries)


def _trace_lines() -> list[dict[str, Any]]:
    wl = load_workload("text2sql", {"queries": 2, "max_rounds": 1})
    dag = load_workload("tool_use", {"queries": 2})
    return [query_to_json(q) for q in (*wl.queries, *dag.queries)]


TRACE_LINES = _trace_lines()
TRACE_KEYS = ["id", "arrival", "tenant", "priority", "workflow", "attrs", "steps", "dag", "unknown"]
ITEM_KEYS = ["stage", "prompt", "output", "op", "duration", "error", "key", "deps"]


@st.composite
def trace_files(draw: Any) -> bytes:
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        d = json.loads(json.dumps(draw(st.sampled_from(TRACE_LINES))))
        mutate(draw, d, TRACE_KEYS)
        items = d.get("dag") if isinstance(d.get("dag"), list) else None
        if items is None and isinstance(d.get("steps"), list) and d["steps"] and isinstance(d["steps"][0], list):
            items = d["steps"][0]
        if items and isinstance(items[0], dict) and draw(st.booleans()):
            mutate(draw, items[0], ITEM_KEYS)
        lines.append(json.dumps(d))
    if draw(st.integers(0, 9)) == 0:
        lines.append(draw(st.sampled_from(["[" * 100_000, "NaN", "[1]", '"x"', "{", '{"id": Infinity}'])))
    text = "\n".join(lines) + "\n"
    if draw(st.integers(0, 19)) == 0:
        return draw(st.binary(max_size=64))
    return encode(text, draw(st.sampled_from(["utf-8"] * 6 + ["utf-16", "latin-1"])))


@settings(FUZZ, max_examples=300)
@given(data=trace_files())
def test_trace_files_load_or_fail_cleanly(tmp_path_factory: Any, data: bytes) -> None:
    path = tmp_path_factory.getbasetemp() / "fuzz-trace.jsonl"
    path.write_bytes(data)
    wl = clean_or_valid(lambda: read_trace(path))
    if wl is not None:
        assert wl.queries and all(math.isfinite(q.arrival) for q in wl.queries)


# End to end: whatever loads also simulates, every query ending done or failed (the
# defects "queries never ended" came from configs that loaded).
SIM = settings(max_examples=150, deadline=None, derandomize=True, database=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@SIM
@given(
    gpu=st.sampled_from(["A100-80G", "A6000", "L4", "H100"]),
    model=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "llama-2-7b", "mistral-7b"]),
    tp=st.sampled_from([1, 2, 4, 8]),
    block_size=st.sampled_from([1, 16, 128, 256]),
    util=st.sampled_from([0.05, 0.3, 0.9, 1.0]),
    inp=st.sampled_from([2, 100, 4000, 60_000, 262_144]),
    out=st.sampled_from([1, 50, 16_384]),
    sd_log=st.sampled_from([0.0, 0.25, 3.0]),
)
def test_what_loads_also_simulates_to_the_end(tmp_path_factory: Any, gpu: str, model: str, tp: int,
                                             block_size: int, util: float, inp: int, out: int,
                                             sd_log: float) -> None:
    base = Path(tmp_path_factory.getbasetemp())
    (base / "sim-cluster.yaml").write_text(yaml.safe_dump({"instances": [
        {"name": "a", "gpu": gpu, "model": model, "tp": tp, "block_size": block_size,
         "gpu_memory_utilization": util}]}))
    (base / "sim-wl.yaml").write_text(yaml.safe_dump({"kind": "dag", "rate": 2.0, "queries": 2, "sd_log": sd_log,
                                                      "nodes": [{"name": "p", "input": inp, "output": out},
                                                                {"name": "q", "input": 50, "output": 5,
                                                                 "deps": ["p"]}]}))
    specs = clean_or_valid(lambda: load_cluster(str(base / "sim-cluster.yaml")))
    wl = load_workload(str(base / "sim-wl.yaml"))
    assert all(isinstance(q.plan, DagPlan) for q in wl.queries)
    if specs is None:
        return
    result = simulate(specs, wl, PolicySpec(), record_calls=False)  # asserts every query ended
    assert len(result.queries) == 2
