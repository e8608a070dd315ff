"""The worker's OS limits: the formulas, and the CPU limit ending a statement that
neither the engine's interrupt nor anyone else stops."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from flowserve.sqlexec import SandboxLimits
from flowserve.sqlexec.pool import _Worker, death_reason
from flowserve.sqlexec.worker import address_space_limit, cpu_limit_s


def test_address_space_limit_adds_the_allowance_to_what_is_mapped() -> None:
    assert address_space_limit(700 << 20, 256 << 20) == 956 << 20  # 700 MiB mapped + 256 MiB


def test_cpu_limit_rounds_used_plus_limit_plus_grace_up_to_whole_seconds() -> None:
    assert cpu_limit_s(2.3, 5.0) == 9  # ⌈2.3 + 5 + 1⌉
    assert cpu_limit_s(0.0, 1.0, grace_s=0.0) == 1


def test_death_reasons_name_the_limit() -> None:
    limits = SandboxLimits(time_limit_s=2.0, worker_memory_bytes=512 << 20)
    assert "CPU time limit of 2 s" in death_reason(-signal.SIGXCPU, limits)
    assert "signal SIGSEGV" in death_reason(-signal.SIGSEGV, limits) and "512 MB" in death_reason(-11, limits)
    assert "exit status 1" in death_reason(1, limits)


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from flowserve.apps.text2sql.bank import create_demo_db

    return create_demo_db(tmp_path_factory.mktemp("worker") / "bank.sqlite")


def test_the_cpu_limit_ends_a_statement_the_engine_does_not_interrupt(sqlite_db: Path) -> None:
    # SQLite's printf never calls the progress handler; with no pool to kill it at the
    # deadline, RLIMIT_CPU does (SIGXCPU)
    worker = _Worker()
    try:
        worker.wait_ready()
        job = {"path": str(sqlite_db), "sql": "SELECT length(printf('%.*c', 2147483647, 'x'))", "kind": "sqlite",
               "limits": SandboxLimits(time_limit_s=0.2).to_json()}
        assert worker.send(job)
        assert worker.read_line(60.0) == b""
        assert worker.wait() == -signal.SIGXCPU
    finally:
        worker.kill()


def test_a_job_answers_one_json_line_and_the_worker_keeps_serving(sqlite_db: Path) -> None:
    worker = _Worker()
    try:
        worker.wait_ready()
        for sql, key in [("SELECT COUNT(*) FROM client", "result"), ("DELETE FROM client", "error")]:
            assert worker.send({"path": str(sqlite_db), "sql": sql, "kind": "sqlite",
                                "limits": SandboxLimits().to_json()})
            answer = json.loads(worker.read_line(30.0) or b"null")
            assert key in answer
        assert answer["refused"] is True
    finally:
        worker.close()
    assert worker.proc.returncode == 0  # stdin closed: it exits by itself


def test_a_job_the_worker_cannot_run_is_answered_and_asks_for_a_replacement(sqlite_db: Path) -> None:
    worker = _Worker()
    try:
        worker.wait_ready()
        assert worker.send({"path": str(sqlite_db), "sql": "SELECT 1", "kind": "sqlite", "limits": {"bogus": 1}})
        answer = json.loads(worker.read_line(30.0) or b"null")
        assert answer["recycle"] is True and "the SQL worker failed: TypeError" in answer["error"]
    finally:
        worker.close()
