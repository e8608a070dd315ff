"""`flowserve bench llmsql --live`'s plumbing on one real llama-server and a 12-row table:
the steps run side by side, "no cache" really is uncached, the engine reports cached
tokens once caching is on, the planner's dedup saves calls, and the JSON is written."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from flowserve.bench.llmsql_live import LiveSetup, run_live, write_results
from flowserve.engines.tinymodel import TinyModel
from flowserve.sql.queries import PRODUCTS

pytestmark = pytest.mark.real_engine  # every test here starts llama-server

DESC = "a sturdy steel water bottle that keeps drinks cold for a whole day, with a leak proof lid " * 3


def table() -> pa.Table:
    # one product, its description shared by all rows; every review appears twice (dedup halves the calls)
    reviews = [f"review number {i % 6} says it works well" for i in range(12)]
    return pa.table({"asin": ["B1"] * 12, "reviewText": reviews, "verified": [True] * 12,
                     "description": [DESC] * 12})


def test_live_steps_report_engine_hit_rates(llama_server_binary: Path, tiny_model: TinyModel, tmp_path: Path) -> None:
    setup = LiveSetup(llama_server_binary, tiny_model, tmp_path, engines=1)
    steps = [("no cache", "none", False), ("cache+original", "none", True), ("+dedup", "dedup", True)]
    res = run_live(setup, {"products": ({"products": table()}, PRODUCTS)}, ["Q1"], steps, lambda m: None)
    runs = res["products/Q1"]["steps"]
    assert list(runs) == ["no cache", "cache+original", "+dedup"]
    assert runs["no cache"]["calls"] == runs["cache+original"]["calls"] == 12
    assert runs["no cache"]["cached_tokens"] == 0 and runs["no cache"]["token_hit_rate"] == 0.0
    # the engine reused the shared instruction (review first, then description, in original order)
    assert runs["cache+original"]["token_hit_rate"] > 0.1
    assert runs["+dedup"]["calls"] == 6 and runs["+dedup"]["rows"] == 12
    assert all(r["latency_s"] > 0 and r["speedup"] is not None for r in runs.values())
    write_results(res, setup, 12, tmp_path / "out.json")
    saved = json.loads((tmp_path / "out.json").read_text())
    assert saved["setting"]["engines"] == 1 and saved["queries"]["products/Q1"]["steps"]["+dedup"]["calls"] == 6
