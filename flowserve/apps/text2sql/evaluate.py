"""Execution accuracy of Text-to-SQL answers against gold SQL, and the report of a run.

Questions are JSON lines `{"id", "question", "gold_sql", "difficulty"}` (`chinook` names
the shipped Chinook set). A prediction is correct when its result rows equal the gold
SQL's as sets (BIRD's execution accuracy), both run in the SQL sandbox with a large row
limit; floats compare to 6 decimals.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from flowserve.errors import ConfigError
from flowserve.schema import read_text
from flowserve.sqlexec import SandboxLimits, SQLError, WorkerPool, run_query

EVAL_LIMITS = SandboxLimits(time_limit_s=30.0, max_rows=100_000, max_result_bytes=64 * 1024 * 1024)
DIFFICULTIES = ("easy", "medium", "hard")


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    gold_sql: str
    difficulty: str = "unknown"


def questions_path(name: str) -> Path:
    if name == "chinook":
        return Path(str(resources.files("flowserve") / "data" / "text2sql" / "chinook-questions.jsonl"))
    return Path(name)


def load_questions(name: str) -> list[Question]:
    path = questions_path(name)
    lines = read_text(path, "questions").splitlines()
    out, seen = [], set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            if not isinstance(d, dict):
                raise ValueError("expected a JSON object")
            q = Question(str(d.get("id", f"q{n}")), d["question"], d["gold_sql"], str(d.get("difficulty", "unknown")))
            if not isinstance(q.question, str) or not q.question.strip():
                raise ValueError("question must be a non-empty string")
            if not isinstance(q.gold_sql, str) or not q.gold_sql.strip():
                raise ValueError("gold_sql must be a non-empty string")
        except (json.JSONDecodeError, KeyError, ValueError) as e:
            raise ConfigError(f"{path}:{n}: not a question line {{id, question, gold_sql, difficulty}} ({e})") from None
        if q.id in seen:
            raise ConfigError(f"{path}:{n}: duplicate question id {q.id!r}")
        seen.add(q.id)
        out.append(q)
    if not out:
        raise ConfigError(f"questions {name!r} hold no question")
    return out


def _norm(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 6)
    if isinstance(v, list | tuple):
        return tuple(_norm(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x)) for k, x in v.items()))
    return v


def result_set(db: str | Path, sql: str, pool: WorkerPool | None = None) -> frozenset[tuple[Any, ...]]:
    """The statement's rows as a set, run in a worker of `pool` (else in this process)."""
    out = pool.run(db, sql, EVAL_LIMITS) if pool is not None else run_query(db, sql, EVAL_LIMITS)
    if out["truncated"]:
        raise SQLError(f"more than {EVAL_LIMITS.max_rows} rows: too many to compare")
    return frozenset(_norm(r) for r in out["rows"])


def execution_match(db: str | Path, predicted: str, gold: str,
                    pool: WorkerPool | None = None) -> tuple[bool, str | None]:
    """(correct, why not); the gold SQL failing is a broken question set: ConfigError.
    The predicted SQL is a model's output: give a `pool` to run it in worker processes."""
    try:
        want = result_set(db, gold)
    except SQLError as e:
        raise ConfigError(f"gold SQL fails on {str(db)!r}: {e} ({gold!r})") from None
    if not predicted.strip():
        return False, "no SQL"
    try:
        got = result_set(db, predicted, pool)
    except SQLError as e:
        return False, f"predicted SQL fails: {e}"
    return (got == want, None if got == want else "different result")


@dataclass
class Outcome:
    id: str
    difficulty: str
    status: str  # completed | failed
    correct: bool
    latency_s: float
    sql: str = ""
    reason: str | None = None
    calls: dict[str, int] = field(default_factory=dict)  # per stage
    stage_latency_s: dict[str, float] = field(default_factory=dict)  # per stage: Σ ready → finished


def _pct(xs: Sequence[float], q: float) -> float | None:
    return float(np.percentile(xs, q)) if xs else None


def summarize(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    n = len(outcomes)
    by: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by[o.difficulty].append(o)
    lat = [o.latency_s for o in outcomes]
    stages = sorted({s for o in outcomes for s in o.calls})
    per_stage = {}
    for s in stages:
        calls = sum(o.calls.get(s, 0) for o in outcomes)
        secs = [o.stage_latency_s[s] for o in outcomes if s in o.stage_latency_s]
        per_stage[s] = {"calls_per_query": calls / n if n else 0.0,
                        "mean_call_latency_s": (sum(secs) / calls) if secs and calls else None}
    reasons: dict[str, int] = defaultdict(int)
    for o in outcomes:
        if not o.correct:
            reasons[(o.reason or "wrong")[:120]] += 1
    return {
        "questions": n, "correct": sum(o.correct for o in outcomes),
        "execution_accuracy": sum(o.correct for o in outcomes) / n if n else 0.0,
        "failed": sum(o.status != "completed" for o in outcomes),
        "by_difficulty": {d: {"questions": len(v), "execution_accuracy": sum(o.correct for o in v) / len(v)}
                          for d, v in sorted(by.items())},
        "latency_s": {"mean": float(np.mean(lat)) if lat else None, "p50": _pct(lat, 50), "p90": _pct(lat, 90),
                      "max": max(lat) if lat else None},
        "stages": per_stage, "not_correct": dict(reasons),
        "outcomes": [asdict(o) for o in outcomes],
    }


def report_table(summary: Mapping[str, Any]) -> str:
    lines = [f"execution accuracy {summary['execution_accuracy']:.3f} "
             f"({summary['correct']}/{summary['questions']}; failed {summary['failed']})"]
    for d, v in summary["by_difficulty"].items():
        lines.append(f"  {d:<8} {v['execution_accuracy']:.3f} of {v['questions']}")
    lat = summary["latency_s"]
    if lat["mean"] is not None:
        lines.append(f"latency s: mean {lat['mean']:.3f}  p50 {lat['p50']:.3f}  p90 {lat['p90']:.3f}  "
                     f"max {lat['max']:.3f}")
    lines.append("| stage | calls per query | mean call latency s |")
    lines.append("|---|---|---|")
    for s, v in summary["stages"].items():
        ml = "—" if v["mean_call_latency_s"] is None else f"{v['mean_call_latency_s']:.3f}"
        lines.append(f"| {s} | {v['calls_per_query']:.2f} | {ml} |")
    for reason, k in summary["not_correct"].items():
        lines.append(f"not correct ×{k}: {reason}")
    return "\n".join(lines)
