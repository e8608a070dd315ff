"""The live paths: a running gateway over its OpenAI API, and a live cluster in-process
(the gateway's live driver with real-time simulated engines)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

import flowserve.sql as fsql
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import serve_config
from flowserve.sql.connection import Connection
from flowserve.sql.errors import SQLInputError
from flowserve.sql.live_backend import LiveClusterBackend
from flowserve.types.specs import InstanceSpec

MODEL = "llama-3.1-8b"
TABLE = pa.table({"info": ["long shared description of a film " * 4] * 3 + ["another film entirely " * 4] * 3,
                  "review": ["good", "bad", "fine", "good", None, "meh"]})


KEY = "sk-sql-test"


@pytest.fixture(scope="module")
def gateway() -> Iterator[BackgroundServer]:
    cfg = serve_config({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}],
                        "api_keys": [KEY],
                        "gateway": {"time_scale": 200.0, "dispatch": "prefix_affinity"}}, "test")
    with BackgroundServer(create_app(cfg)) as srv:
        yield srv


def test_gateway_statement_in_row_order_with_cached_prefixes_as_batch_work(gateway: BackgroundServer) -> None:
    driver = gateway.app.state.gateway.driver
    classes: list[str] = []
    new_query = driver.new_query

    def spy(*args: Any, **kw: Any) -> Any:  # records the class each query reached the driver with
        classes.append(kw.get("cls", "interactive"))
        return new_query(*args, **kw)

    driver.new_query = spy
    try:
        con = fsql.connect(gateway=gateway.url, optimize="all", api_key=KEY)
        con.register("t", TABLE)
        r = con.sql("SELECT review, LLM('Summarise', info, review) AS s FROM t")
    finally:
        driver.new_query = new_query
    assert [row[0] for row in r.rows] == TABLE.column("review").to_pylist()
    assert all(isinstance(row[1], str) and row[1] for i, row in enumerate(r.rows) if i != 4)
    assert r.rows[4][1] is None and r.rows[4][2] == "NULL in field 'review'"
    assert r.report["calls"] == 5 and r.report["cached_tokens"] > 0
    assert classes == ["batch"] * 5  # LLM-in-SQL is batch work unless asked otherwise


def test_gateway_without_its_key_fails_every_row_with_the_reason(gateway: BackgroundServer) -> None:
    con = fsql.connect(gateway=gateway.url, optimize="none", model=MODEL)
    con.register("t", TABLE)
    r = con.sql("SELECT LLM('Summarise', review) AS s FROM t")
    g401, g_null = r.report["errors"]
    assert g_null["reason"] == "NULL in field 'review'"
    assert g401["rows"] == 5 and g401["reason"].startswith("HTTP 401")
    assert r.report["rows_failed"] == r.report["rows_planned"] == 6


def test_gateway_down_mid_statement_gives_row_errors_not_silence() -> None:
    con = fsql.connect(gateway="http://127.0.0.1:9", optimize="none", model=MODEL)
    con.register("t", TABLE)
    r = con.sql("SELECT LLM('Summarise {review}', review) AS s FROM t")
    assert all(row[0] is None for row in r.rows)
    assert all("gateway unreachable" in row[1] or "NULL" in row[1] for row in r.rows)
    # the reasons are grouped: one entry per reason with its count and a few example rows
    assert r.report["rows_failed"] == 6
    down, null = r.report["errors"]
    assert (down["rows"], len(down["examples"])) == (5, 3) and "gateway unreachable" in down["reason"]
    assert (null["rows"], null["reason"]) == (1, "NULL in field 'review'")


def test_live_cluster_in_process_runs_each_batch_as_one_query() -> None:
    spec = InstanceSpec("a", "A100-80G", MODEL, backend="sim", reports_capacity=True)
    backend = LiveClusterBackend([spec])
    con = Connection(backend, "all")
    try:
        con.register("t", TABLE)
        r = con.sql("SELECT LLM_FILTER('Kids? {info} {review}', info, review) AS k FROM t")
        assert len(r.rows) == 6 and r.rows[4][0] is None
        # one query per operator batch reached the core (plus none per row)
        assert backend.driver.core.decisions >= 5
        assert r.report["calls"] == 5  # 5 non-NULL rows, the table's own order kept
    finally:
        con.close()


def test_chat_is_true_or_false():
    """`chat=True` (each row's prompt one user message) runs in tests/sql/test_real_model.py."""
    with pytest.raises(SQLInputError, match="chat must be true or false"):
        fsql.connect(cluster="paper-l4", chat="yes")  # type: ignore[arg-type]
