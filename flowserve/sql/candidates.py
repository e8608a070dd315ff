"""The candidate plans of one LLM operator: a field order per row and a send order.

Columns: as written (`original`), one fixed order by ASL·N/C (`reorder`), or GGR's
per-group orders (`ggr`). Rows: the table's own order, or sorted so that rows sharing
leading fields are adjacent (`+sort`; for GGR its groups, in its own order). Which
exist depends on the statement's optimisations; the planner estimates each and keeps
the best (the original order unless another is estimated to be faster).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from flowserve.sql.ggr import GGRConfig, ggr
from flowserve.sql.options import Optimizations
from flowserve.sql.reorder import Rows, fixed_order, sort_rows

Arrangement = list[tuple[int, tuple[int, ...]]]  # (row, its field order), in send order


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str
    arrangement: Arrangement
    grouped: bool  # rows sharing leading fields are adjacent (a prefix warm-up can pay)
    solver_s: float = 0.0


def candidates(rows: Rows, n_cols: int, opts: Optimizations, cfg: GGRConfig) -> list[Candidate]:
    n = len(rows)
    natural = tuple(range(n_cols))
    out = [Candidate("original", [(i, natural) for i in range(n)], False)]
    if opts.sort:
        out.append(Candidate("sort", [(i, natural) for i in sort_rows(rows, natural)], True))
    if opts.reorder:
        t0 = time.perf_counter()
        order = fixed_order(rows, n_cols)
        dt = time.perf_counter() - t0
        if order != natural:
            out.append(Candidate("reorder", [(i, order) for i in range(n)], False, dt))
        if opts.sort and order != natural:
            out.append(Candidate("reorder+sort", [(i, order) for i in sort_rows(rows, order)], True, dt))
    if opts.ggr:
        t0 = time.perf_counter()
        grouped = ggr(rows, n_cols, cfg)
        dt = time.perf_counter() - t0
        out.append(Candidate("ggr", sorted(grouped), False, dt))
        if opts.sort:
            out.append(Candidate("ggr+sort", grouped, True, dt))
    return out
