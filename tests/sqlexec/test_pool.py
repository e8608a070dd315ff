"""The SQL sandbox's worker processes (issue 27, item 4): the resource bombs that beat the
engines' own limits end with a clear SQLError naming the limit that stopped them (time or
memory: which comes first depends on the machine's speed, so either will do), a killed or
crashed worker is replaced, and results and refusals match the in-process sandbox. How
soon a bomb is stopped is `flowserve bench sandbox`'s figure, never a timed test."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowserve.sqlexec import SandboxLimits, SQLError, SQLRefused, WorkerPool, run_query

LIMIT_S = 0.5
STOPPED = "Out of Memory|time limit"  # either limit, with its name
BOMB_LIMITS = SandboxLimits(time_limit_s=LIMIT_S, worker_memory_bytes=256 << 20)


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from flowserve.apps.text2sql.bank import create_demo_db

    return create_demo_db(tmp_path_factory.mktemp("pool") / "bank.sqlite")


@pytest.fixture(scope="module")
def duck_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pool-duck") / "t.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT range AS x, 'v' || range AS s FROM range(50)")
    con.close()
    return path


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    with WorkerPool(2) as p:
        p.warm()
        yield p


def test_results_and_refusals_match_the_in_process_sandbox(pool: WorkerPool, sqlite_db: Path,
                                                           duck_db: Path, tmp_path: Path) -> None:
    for db, sql in [(sqlite_db, "SELECT client_id, gender FROM client ORDER BY client_id"),
                    (sqlite_db, "SELECT x'00ff', 1e999"), (duck_db, "SELECT COUNT(*), MAX(s) FROM t")]:
        assert pool.run(db, sql) == run_query(db, sql)
    with pytest.raises(SQLRefused, match=r"ATTACH \(.*p\.sqlite\)"):
        pool.run(sqlite_db, f"ATTACH DATABASE '{tmp_path / 'p.sqlite'}' AS p")
    with pytest.raises(SQLRefused, match="COPY"):
        pool.run(duck_db, f"COPY t TO '{tmp_path / 'x.csv'}'")
    assert not list(tmp_path.iterdir())
    with pytest.raises(SQLError, match="no such table: nowhere"):
        pool.run(sqlite_db, "SELECT * FROM nowhere")
    with pytest.raises(SQLError, match="no SQL"):
        pool.run(sqlite_db, " ")


@pytest.mark.parametrize(("db", "sql"), [
    ("duck", "SELECT length(repeat('x', 4000000000))"),  # RLIMIT_AS: fails at once on most machines
    ("duck", "SELECT length(lpad('x', 2000000000, 'y'))"),
    ("sqlite", "SELECT length(printf('%.*c', 2147483647, 'x'))"),
])
def test_the_issues_bombs_are_stopped_by_a_limit_and_the_pool_recovers(
        pool: WorkerPool, sqlite_db: Path, duck_db: Path, db: str, sql: str) -> None:
    path = duck_db if db == "duck" else sqlite_db
    with pytest.raises(SQLError, match=STOPPED):
        pool.run(path, sql, BOMB_LIMITS)
    assert pool.run(path, "SELECT 1 AS one")["rows"] == [[1]]


def test_a_worker_killed_mid_query_fails_that_query_clearly_and_is_replaced(sqlite_db: Path) -> None:
    forever = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r"
    with WorkerPool(1) as pool, ThreadPoolExecutor(1) as threads:
        pool.warm()
        pool._idle[0].wait_ready()
        pid = pool._idle[0].proc.pid
        job = threads.submit(pool.run, sqlite_db, forever, SandboxLimits(time_limit_s=30.0))
        deadline = time.monotonic() + 10
        while pool._idle and time.monotonic() < deadline:  # poll until the job holds the worker
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SQLError, match=r"worker process died \(signal SIGKILL\)"):
            job.result(timeout=10)
        assert pool.replaced == 1
        assert pool.run(sqlite_db, "SELECT COUNT(*) FROM client")["rows"] == [[200]]
        assert pool._idle[0].proc.pid != pid


def test_a_worker_that_died_while_idle_is_replaced_before_the_next_query(sqlite_db: Path) -> None:
    with WorkerPool(1) as pool:
        pool.warm()
        (worker,) = pool._idle
        worker.proc.kill()
        worker.proc.wait()
        assert pool.run(sqlite_db, "SELECT COUNT(*) FROM client")["rows"] == [[200]]
        assert pool.replaced == 1


def test_a_closed_pool_refuses_work_and_leaves_no_process(sqlite_db: Path) -> None:
    pool = WorkerPool(2)
    pool.run(sqlite_db, "SELECT 1")
    procs = [w.proc for w in pool._idle]
    pool.close()
    assert procs and all(p.poll() is not None for p in procs)
    with pytest.raises(SQLError, match="closed"):
        pool.run(sqlite_db, "SELECT 1")
    with pytest.raises(ValueError, match="at least one worker"):
        WorkerPool(0)


_BOMBS = st.one_of(
    st.builds("SELECT length(repeat('x', {}))".format, st.integers(10**8, 2**40)),
    st.builds("SELECT length(lpad('x', {}, 'y'))".format, st.integers(10**8, 2**32)),
    st.builds("SELECT string_agg(repeat('ab', {}), ',') FROM range({})".format,
              st.integers(10**6, 10**9), st.integers(1, 10**6)),
    st.builds("SELECT COUNT(*) FROM range({}) a, range({}) b".format, st.integers(10**5, 10**9),
              st.integers(10**3, 10**6)),
)
_SQLITE_BOMBS = st.one_of(
    st.builds("SELECT length(printf('%.*c', {}, 'x'))".format, st.integers(10**8, 2**31 - 1)),
    st.builds("SELECT length(zeroblob({}))".format, st.integers(10**8, 2**31 - 1)),
    st.builds("SELECT length(replace(hex(zeroblob({})), '0', 'xx'))".format, st.integers(10**5, 10**6)),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bomb=st.one_of(st.tuples(st.just("duck"), _BOMBS), st.tuples(st.just("sqlite"), _SQLITE_BOMBS)))
def test_fuzz_resource_bombs_end_with_an_sql_error_or_a_result(
        pool: WorkerPool, sqlite_db: Path, duck_db: Path, bomb: tuple[str, str]) -> None:
    db, sql = bomb
    try:
        out = pool.run(duck_db if db == "duck" else sqlite_db, sql, BOMB_LIMITS)
    except SQLError as e:
        assert str(e)
    else:
        assert set(out) == {"columns", "rows", "truncated"}
