"""The SQL sandbox: one regression test per escape found in the Text-to-SQL executor
(ATTACH, VACUUM INTO, randomblob(900000000), PRAGMA), DuckDB's lock-down, JSON-safe
results and a fuzz test that only SQLError ever leaves it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowserve.sqlexec import SandboxLimits, SQLError, SQLRefused, database_kind, run_query

CHINOOK = Path(__file__).resolve().parents[2] / "flowserve" / "data" / "sqlite" / "chinook.sqlite"


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from flowserve.apps.text2sql.bank import create_demo_db

    return create_demo_db(tmp_path_factory.mktemp("sbx") / "bank.sqlite")


@pytest.fixture(scope="module")
def duck_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("duck") / "t.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT range AS x, 'v' || range AS s FROM range(50)")
    con.close()
    return path


def test_attach_is_refused_and_creates_no_file(sqlite_db: Path, tmp_path: Path) -> None:
    target = tmp_path / "p.sqlite"
    with pytest.raises(SQLRefused, match=r"ATTACH \(.*p\.sqlite\)"):
        run_query(sqlite_db, f"ATTACH DATABASE '{target}' AS p")
    assert not target.exists()


def test_vacuum_into_is_refused_and_copies_nothing(sqlite_db: Path, tmp_path: Path) -> None:
    target = tmp_path / "copy.sqlite"
    with pytest.raises(SQLRefused, match="ATTACH"):
        run_query(sqlite_db, f"VACUUM INTO '{target}'")
    assert not target.exists()
    with pytest.raises(SQLRefused, match="refused"):
        run_query(sqlite_db, "VACUUM")


def test_huge_randomblob_fails_fast_with_the_length_limit(sqlite_db: Path) -> None:
    with pytest.raises(SQLError, match=r"too big.*1000000 bytes"):
        run_query(sqlite_db, "SELECT randomblob(900000000)")


def test_blobs_come_back_json_safe_and_results_are_capped(sqlite_db: Path) -> None:
    out = run_query(sqlite_db, "SELECT x'00ff', 1e999, -1e999")
    assert out["rows"] == [[{"blob_base64": "AP8="}, "inf", "-inf"]]
    json.dumps(out, allow_nan=False)
    with pytest.raises(SQLRefused, match="result cap of 1000 bytes"):
        run_query(sqlite_db, "SELECT randomblob(2000)", SandboxLimits(max_result_bytes=1000))
    out = run_query(sqlite_db, "SELECT hex(randomblob(100)) FROM client", SandboxLimits(max_result_bytes=1000))
    assert out["truncated"] and 0 < len(out["rows"]) < 5 and len(json.dumps(out["rows"])) <= 1000


@pytest.mark.parametrize("sql", ["PRAGMA journal_mode = DELETE", "PRAGMA writable_schema = 1",
                                 "PRAGMA journal_mode", "PRAGMA database_list"])
def test_pragmas_other_than_introspection_are_refused(sqlite_db: Path, sql: str) -> None:
    with pytest.raises(SQLRefused, match=r"PRAGMA \((journal_mode|writable_schema|database_list)\)"):
        run_query(sqlite_db, sql)


def test_introspection_pragmas_and_pragma_functions_read(sqlite_db: Path) -> None:
    out = run_query(sqlite_db, "PRAGMA table_info(client)")
    assert [r[1] for r in out["rows"]][:2] == ["client_id", "gender"]
    out = run_query(sqlite_db, "SELECT name FROM pragma_table_info('loan') ORDER BY cid LIMIT 2")
    assert out["rows"] == [["loan_id"], ["account_id"]]


@pytest.mark.parametrize("sql,what", [("DELETE FROM client", "DELETE"),
                                      ("CREATE TABLE x (a)", r"INSERT \(sqlite_master\)|CREATE_TABLE"),
                                      ("BEGIN", "TRANSACTION"), ("SELECT load_extension('x')", "load_extension"),
                                      ("DETACH DATABASE main", "DETACH")])
def test_writes_and_file_functions_are_refused_by_name(sqlite_db: Path, sql: str, what: str) -> None:
    with pytest.raises(SQLRefused, match=what):
        run_query(sqlite_db, sql)


def test_time_limit_interrupts_a_query_that_never_finishes(sqlite_db: Path, duck_db: Path) -> None:
    forever = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r"
    with pytest.raises(SQLError, match=r"time limit of 0\.1 s"):
        run_query(sqlite_db, forever, SandboxLimits(time_limit_s=0.1))
    with pytest.raises(SQLError, match=r"time limit of 0\.2 s"):
        run_query(duck_db, "SELECT COUNT(*) FROM range(10000000000) a, range(1000) b",
                  SandboxLimits(time_limit_s=0.2))


def test_duckdb_is_read_only_without_external_access(duck_db: Path, tmp_path: Path) -> None:
    assert database_kind(duck_db) == "duckdb"
    assert run_query(duck_db, "SELECT COUNT(*), MAX(s) FROM t")["rows"] == [[50, "v9"]]
    assert run_query(duck_db, "SELECT blob 'ab', 'nan'::DOUBLE")["rows"] == [[{"blob_base64": "YWI="}, "nan"]]
    for sql, what in [(f"ATTACH '{tmp_path / 'z.db'}'", "ATTACH"), (f"COPY t TO '{tmp_path / 'x.csv'}'", "COPY"),
                      ("SET threads = 8", "SET"), ("DELETE FROM t", "DELETE")]:
        with pytest.raises(SQLRefused, match=what):
            run_query(duck_db, sql)
    with pytest.raises(SQLRefused, match="file system operations are disabled"):
        run_query(duck_db, "SELECT * FROM read_csv('/etc/passwd')")
    assert not list(tmp_path.iterdir())
    with pytest.raises(SQLError, match="one statement at a time"):
        run_query(duck_db, "SELECT 1; SELECT 2")


def test_missing_unreadable_and_foreign_files_are_errors(tmp_path: Path) -> None:
    with pytest.raises(SQLError, match="cannot read database"):
        run_query(tmp_path / "none.sqlite", "SELECT 1")
    junk = tmp_path / "junk.db"
    junk.write_text("hello, not a database at all")
    with pytest.raises(SQLError, match="neither a SQLite nor a DuckDB"):
        run_query(junk, "SELECT 1")
    with pytest.raises(SQLError, match="no SQL"):
        run_query(junk, "  ")


@pytest.mark.skipif(not CHINOOK.is_file(), reason="shared data not mounted")
def test_chinook_reads(tmp_path: Path) -> None:
    db = Path(shutil.copy(CHINOOK, tmp_path / "c.sqlite"))
    assert run_query(db, "SELECT COUNT(*) FROM Track")["rows"] == [[3503]]


_SQL = st.one_of(
    st.text(max_size=80),
    st.builds(lambda a, b: f"{a} {b}", st.sampled_from(
        ["SELECT", "PRAGMA", "ATTACH", "VACUUM", "WITH", "DELETE FROM", "SELECT * FROM", "EXPLAIN"]),
        st.text(alphabet="abcdefxyz0123456789 ()*,'=;.-", max_size=40)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sql=_SQL)
def test_fuzz_only_sql_errors_leave_the_sandbox(sqlite_db: Path, sql: str) -> None:
    try:
        out = run_query(sqlite_db, sql, SandboxLimits(time_limit_s=0.5))
    except SQLError as e:
        assert str(e)
    else:
        json.dumps(out, allow_nan=False)
