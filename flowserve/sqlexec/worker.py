"""The SQL sandbox's worker process (`python -m flowserve.sqlexec.worker`): runs one
statement at a time for a `WorkerPool`, under OS limits that hold where the engines'
own limits do not (DuckDB's string functions allocate outside its buffer manager;
SQLite's `printf` ignores the progress handler).

Protocol: one JSON job per line on stdin (`{"path", "sql", "kind", "limits"}`), one JSON
answer per line on the descriptor that was stdout: `{"result": ...}` or `{"error",
"refused", "recycle"}`. fd 1 itself then points at /dev/null, so nothing a database
prints (DuckDB's progress bar) reaches the protocol or the host's terminal. The worker
says `ready` once its imports are done, and exits when stdin closes.

Once a job's database is open (DuckDB maps its arenas when it connects), soft limits:
RLIMIT_AS at the worker's address space then plus `worker_memory_bytes`, RLIMIT_CPU at
the CPU time used so far plus the time limit and a grace second (SIGXCPU then ends the
worker). Soft limits can be lifted again after the job, so one warm worker serves many
jobs; a job the worker itself fails at is answered with `recycle` and the pool replaces
the worker.
"""

from __future__ import annotations

import json
import math
import os
import resource
import sys
from typing import Any, BinaryIO

from flowserve.sqlexec.limits import SandboxLimits, SQLError, SQLRefused
from flowserve.sqlexec.run import run_query

CPU_GRACE_S = 1.0  # beyond the time limit: the in-engine interrupt answers first


def address_space_limit(current_bytes: int, allowance_bytes: int) -> int:
    """RLIMIT_AS for one job: what the worker has mapped now plus the job's allowance
    (setrlimit(2): the limit covers the whole virtual address space)."""
    return current_bytes + allowance_bytes


def cpu_limit_s(used_s: float, time_limit_s: float, grace_s: float = CPU_GRACE_S) -> int:
    """RLIMIT_CPU (whole seconds, cumulative per process, setrlimit(2)) for one job."""
    return math.ceil(used_s + time_limit_s + grace_s)


def mapped_bytes() -> int:
    """The process's virtual address space (proc(5): /proc/self/statm, field 1, in pages)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def cpu_used_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _limit(limits: SandboxLimits) -> None:
    """Once the database is open (DuckDB maps its arenas then): the job's soft limits."""
    _, as_hard = resource.getrlimit(resource.RLIMIT_AS)
    _, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_AS, (address_space_limit(mapped_bytes(), limits.worker_memory_bytes),
                                            as_hard))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit_s(cpu_used_s(), limits.time_limit_s), cpu_hard))


def _lift() -> None:
    for which in (resource.RLIMIT_AS, resource.RLIMIT_CPU):
        hard = resource.getrlimit(which)[1]
        resource.setrlimit(which, (hard, hard))


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """One job's answer (never raises: a failure of the worker itself asks the pool to
    replace it)."""
    try:
        limits = SandboxLimits(**job["limits"])
        return {"result": run_query(job["path"], job["sql"], limits, job["kind"], lambda: _limit(limits))}
    except SQLRefused as e:
        return {"error": str(e), "refused": True}
    except SQLError as e:
        return {"error": str(e)}
    except MemoryError:  # the interpreter itself ran out
        return {"error": f"the query exceeded the memory limit of {job['limits']['worker_memory_bytes'] >> 20} MB",
                "recycle": True}
    except Exception as e:  # e.g. no room left for the time limit's thread
        return {"error": f"the SQL worker failed: {type(e).__name__}: {e}", "recycle": True}
    finally:
        _lift()


def serve(jobs: BinaryIO, answers: BinaryIO) -> None:
    answers.write(b"ready\n")
    answers.flush()
    for line in jobs:
        try:
            answer = run_job(json.loads(line))
        except Exception as e:  # a malformed job, or no memory left even to answer
            answer = {"error": f"the SQL worker failed: {type(e).__name__}", "recycle": True}
        answers.write(json.dumps(answer).encode() + b"\n")
        answers.flush()


def main() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    with os.fdopen(os.dup(1), "wb") as answers:
        os.dup2(devnull, 1)  # fd 1 (and so sys.stdout) now writes nowhere
        os.close(devnull)
        import duckdb  # noqa: F401  (warm: the first job must not pay for the import)

        serve(sys.stdin.buffer, answers)


if __name__ == "__main__":
    main()
