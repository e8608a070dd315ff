"""Runs LLM operators: plan the rows, look the result cache up, send the rest to the
backend as one batch, parse the answers and keep them in the statement's memo, which the
internal UDFs read (row order is DuckDB's; the memo maps argument values to answers)."""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from flowserve.sql.backend import Answer, SQLBackend
from flowserve.sql.cache import ResultCache, cache_key
from flowserve.sql.engine_model import engine_shape
from flowserve.sql.errors import OutputError, StatementFailed
from flowserve.sql.estimate import token_hit_rate
from flowserve.sql.ggr import DEFAULT_GGR, GGRConfig
from flowserve.sql.options import Optimizations
from flowserve.sql.planner import LLMOp, PlannedOp, plan_op
from flowserve.sql.report import ErrorLog

Key = tuple[int, bytes]  # (operator, digest of the argument values): 10⁶ rows keep no copies of their text
PARAMS = {"temperature": 0.0}


@dataclass
class Stats:
    rows: int = 0  # rows whose value is known
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_hits: int = 0
    errors: ErrorLog = field(default_factory=ErrorLog)
    solver_s: float = 0.0
    dedup_saved: int = 0
    operators: list[dict[str, Any]] = field(default_factory=list)

    @property
    def hit_rate(self) -> float:
        return token_hit_rate(self.cached_tokens, self.prompt_tokens)

    def sent(self, calls: int, prompt: int, cached: int) -> None:
        self.calls += calls
        self.prompt_tokens += prompt
        self.cached_tokens += cached

    def planned(self, solver_s: float, dedup_saved: int) -> None:
        self.solver_s += solver_s
        self.dedup_saved += dedup_saved

    def cache_hit(self) -> None:
        self.cache_hits += 1

    def ran(self, rows: int, operator: dict[str, Any]) -> None:
        """An operator ran over `rows` (`operator`: what it did)."""
        self.rows += rows
        self.operators.append(operator)


class Executor:
    def __init__(self, backend: SQLBackend, opts: Optimizations, on_error: str = "null",
                 cache: ResultCache | None = None, seed: int = 0, ggr_cfg: GGRConfig = DEFAULT_GGR,
                 on_progress: Callable[[Stats], None] | None = None) -> None:
        assert on_error in ("null", "fail"), on_error
        self.backend = backend
        self.opts = opts
        self.on_error = on_error
        self.cache = cache
        self.seed = seed
        self.ggr_cfg = ggr_cfg
        self.on_progress = on_progress
        self.memo: dict[Key, tuple[Any, str | None]] = {}
        self.ops: dict[int, LLMOp] = {}
        self.stats = Stats()
        self.planned: list[PlannedOp] = []
        # WHERE operators whose prefetch saw every row that passes the other conjuncts: a row
        # outside it fails another conjunct, so its value cannot change the result (DuckDB
        # may still evaluate the conjuncts in any order): NULL, no call
        self.closed: set[int] = set()
        self._lock = threading.RLock()

    def begin(self, ops: dict[int, LLMOp]) -> None:
        """A new statement with these operators: fresh figures and plans (the memo too)."""
        self.ops = ops
        self.memo.clear()
        self.stats = Stats()
        self.planned = []
        self.closed = set()

    @contextlib.contextmanager
    def using(self, backend: SQLBackend) -> Iterator[None]:
        """Run on `backend` meanwhile (explain: the simulated copy of the cluster)."""
        real, self.backend = self.backend, backend
        try:
            yield
        finally:
            self.backend = real

    def _progress(self, calls: int, prompt: int, cached: int) -> None:
        s = self.stats
        s.sent(calls, prompt, cached)
        if self.on_progress is not None:
            self.on_progress(s)

    def run_op(self, op_id: int, rows: Sequence[Sequence[Any]], stage: str) -> PlannedOp:
        """Plan and run one operator over `rows` (argument tuples); fills the memo."""
        with self._lock:
            op = self.ops[op_id]
            todo = [tuple(r) for r in rows if row_key(op_id, r) not in self.memo]
            planned = plan_op(op, todo, self.opts, self.ggr_cfg, engine_shape(self.backend.cluster))
            self.planned.append(planned)
            self.stats.planned(planned.solver_s, planned.dedup_saved)
            answers: list[Answer | None] = [None] * len(planned.requests)
            send = []
            keys = []
            for k, req in enumerate(planned.requests):
                key = cache_key(self.backend.model, req.prompt, {**PARAMS, "max_tokens": req.max_tokens})
                keys.append(key)
                text = self.cache.get(key) if self.cache is not None and not req.warm else None
                if text is not None:
                    answers[k] = Answer(text)
                    self.stats.cache_hit()
                else:
                    send.append(k)
            if send:
                got = self.backend.run([planned.requests[k] for k in send], stage, op.output, self._progress)
                assert len(got) == len(send), (len(got), len(send))
                for k, a in zip(send, got, strict=True):
                    answers[k] = a
                    if self.cache is not None and a.error is None and a.text is not None and \
                            not planned.requests[k].warm:
                        self.cache.put(keys[k], a.text)
            values: list[tuple[Any, str | None]] = []
            for a, req in zip(answers, planned.requests, strict=True):
                assert a is not None
                if req.warm:
                    values.append((None, None))
                    continue
                if a.error is not None or a.text is None:
                    values.append((None, a.error or "no answer"))
                    continue
                try:
                    values.append((op.output.parse(a.text), None))
                except OutputError as e:
                    values.append((None, str(e)))
            for i, r in enumerate(todo):
                k = planned.row_request[i]
                v = (None, planned.row_error[i]) if k is None else values[k]
                self.memo[row_key(op_id, r)] = v
                if v[1] is not None:
                    self.stats.errors.add(op.fn, v[1], _short(r))
                    if self.on_error == "fail":
                        raise StatementFailed(f"{op.fn}(): a row failed: {v[1]} "
                                              f"(on_error=fail; use on_error=null to get NULL and llm_error)")
            self.stats.ran(len(rows), {
                "op": op.fn, "stage": stage, "rows": len(rows), "calls": len(send),
                "cache_hits": len(planned.requests) - len(send), "dedup_saved": planned.dedup_saved,
                "solver_s": planned.solver_s, "plan": planned.chosen,
                "column_orders": [[list(o), n] for o, n in planned.orders.most_common(5)]})
            if self.on_progress is not None:
                self.on_progress(self.stats)
            return planned

    def lookup(self, op_id: int, rows: Sequence[Sequence[Any]], error: bool = False) -> list[Any]:
        """Values (or error texts) of rows; rows not in the memo run as one batch first."""
        with self._lock:
            keys = [row_key(op_id, r) for r in rows]
            if op_id in self.closed:
                return [self.memo.get(k, (None, None))[1 if error else 0] for k in keys]
            missing = list({k: tuple(r) for k, r in zip(keys, rows, strict=True) if k not in self.memo}.values())
            if missing:
                self.run_op(op_id, missing, f"op{op_id}")
            return [self.memo[k][1 if error else 0] for k in keys]

    def value(self, op_id: int, row: Sequence[Any]) -> tuple[Any, str | None]:
        """A row's (value, error) once its operator ran."""
        return self.memo[row_key(op_id, row)]


def row_key(op_id: int, row: Sequence[str | None]) -> Key:
    h = hashlib.blake2b(digest_size=16)
    for v in row:
        h.update(b"\xff" if v is None else f"{len(v)}:".encode() + str(v).encode("utf-8", "surrogatepass"))
    return (op_id, h.digest())


def _short(row: Sequence[Any]) -> str:
    return ", ".join(repr(v if not isinstance(v, str) or len(v) <= 40 else v[:37] + "...") for v in row)
