"""The `sql` tool in the gateway (issue 27, item 4): the issue's resource bombs run in
the sandbox's worker processes, end with the limit they hit, and the gateway stays
healthy meanwhile — `/health` and completions answer while they run. Which limit stops a
bomb first (time or memory) and how fast the answers come depend on the machine: the
tests assert neither (issue 44 item 13); speeds are `flowserve bench sandbox`'s."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from live_support import MODEL

from flowserve.apps.base import WorkflowDef
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.graph.nodes import NodeResult
from flowserve.graph.workflow import Graph, Workflow
from flowserve.host.settings import serve_config

LIMIT_S = 1.0


class RunSQL(Workflow):
    def __init__(self, database: str, sql: str) -> None:
        self.database, self.sql = database, sql

    def start(self, g: Graph) -> None:
        g.tool("q", "sql", database=self.database, sql=self.sql)

    def output(self, results: Mapping[str, NodeResult]) -> dict[str, Any]:
        return {"error": results["q"].error, "value": results["q"].value}


SQL = WorkflowDef("sql", "one statement", lambda inputs, _s, _m: RunSQL(inputs["database"], inputs["sql"]))


@pytest.fixture(scope="module")
def databases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from flowserve.apps.text2sql.bank import create_demo_db

    folder = tmp_path_factory.mktemp("bombs")
    duck = folder / "t.duckdb"
    con = duckdb.connect(str(duck))
    con.execute("CREATE TABLE t AS SELECT range AS x FROM range(10)")
    con.close()
    return {"sqlite": str(create_demo_db(folder / "bank.sqlite")), "duckdb": str(duck)}


def test_the_gateway_stays_healthy_while_sql_bombs_run(databases: dict[str, str]) -> None:
    bombs = [("duckdb", "SELECT length(repeat('x', 4000000000))"),
             ("duckdb", "SELECT length(lpad('x', 2000000000, 'y'))"),
             ("sqlite", "SELECT length(printf('%.*c', 2147483647, 'x'))")]
    cfg = serve_config({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}],
                        "gateway": {"time_scale": 1e4, "sql_time_limit_s": LIMIT_S, "sql_memory_mb": 256,
                                    "sql_workers": 3}}, "test")
    results: dict[int, httpx.Response] = {}
    with BackgroundServer(create_app(cfg, workflows={"sql": SQL})) as srv, \
            httpx.Client(base_url=srv.url, timeout=60) as http:
        def bomb(i: int, db: str, sql: str) -> None:
            with httpx.Client(base_url=srv.url, timeout=60) as own:
                results[i] = own.post("/v1/workflows/sql", json={"input": {"database": databases[db], "sql": sql}})

        threads = [threading.Thread(target=bomb, args=(i, *b)) for i, b in enumerate(bombs)]
        for t in threads:
            t.start()
        served = 0
        while True:  # at least once: the bombs take a limit's time (or gigabytes) to be stopped
            assert http.get("/health").status_code == 200
            resp = http.post("/v1/completions", json={"model": MODEL, "prompt": "count the loans", "max_tokens": 2})
            assert resp.status_code == 200
            served += 1
            if not any(t.is_alive() for t in threads):
                break
        for t in threads:
            t.join()
        ok = http.post("/v1/workflows/sql", json={"input": {"database": databases["sqlite"],
                                                            "sql": "SELECT COUNT(*) FROM client"}})
    assert served >= 1
    errors = [results[i].json()["output"]["error"] for i in range(len(bombs))]
    for e in errors:  # stopped by whichever limit a machine of this speed hits first, with a clear error
        assert "Out of Memory" in e or "time limit of 1 s" in e, e
    assert ok.json()["output"]["value"]["rows"] == [[200]]  # the workers were replaced


def test_the_sql_tool_names_a_missing_database_and_refused_statements(databases: dict[str, str],
                                                                      tmp_path: Path) -> None:
    cfg = serve_config({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL}],
                        "gateway": {"time_scale": 1e4}}, "test")
    with BackgroundServer(create_app(cfg, workflows={"sql": SQL})) as srv, \
            httpx.Client(base_url=srv.url, timeout=60) as http:
        def error(db: str, sql: str) -> str:
            resp = http.post("/v1/workflows/sql", json={"input": {"database": db, "sql": sql}})
            return resp.json()["output"]["error"]

        assert "cannot read database" in error(str(tmp_path / "none.sqlite"), "SELECT 1")
        assert "refused by the read-only sandbox" in error(databases["sqlite"], "DELETE FROM client")
