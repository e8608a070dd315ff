"""GGR, greedy group recursion (Liu et al., "Optimizing LLM Queries in Relational Data
Analytics Workloads", 2025, Alg. 1): per-group column orders that maximise shared prefixes.

At each level the value v of column c with the highest score len²·(count−1) forms a group;
its rows put c first, then the columns functionally determined by c (their values are
fixed inside the group, so they extend the shared prefix), then recurse on the remaining
columns. The other rows are solved the same way at the same level. Near-unique columns
go last in every row. Recursion is bounded (depth, group size) and falls back to the
fixed ASL·N/C order with sorted rows; large tables are split into chunks.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from flowserve.sql.reorder import Rows, fixed_order, sort_rows

Arrangement = list[tuple[int, tuple[int, ...]]]  # (row index, its column order), in send order


@dataclass(frozen=True, slots=True)
class GGRConfig:
    max_depth: int = 4  # recursion levels before the fixed-order fallback
    min_group: int = 2  # groups smaller than this are not recursed into
    near_unique: float = 0.9  # cardinality / rows at or above which a column goes last
    split_rows: int = 20_000  # tables larger than this are solved in chunks


DEFAULT_GGR = GGRConfig()


def ggr_value_score(length: int, count: int) -> int:
    """HitCount(v) = len(v)² · (count(v) − 1) (GGR, Alg. 1: prefix tokens a group saves, squared
    length favouring long shared values)."""
    assert length >= 0 and count >= 1, (length, count)
    return length * length * (count - 1)


def functional_dependencies(rows: Rows, cols: Sequence[int]) -> dict[int, tuple[int, ...]]:
    """For each column a, the columns b it determines (every a-value has one b-value)."""
    out: dict[int, tuple[int, ...]] = {}
    for a in cols:
        deps = []
        for b in cols:
            if a == b:
                continue
            seen: dict[str, str] = {}
            if all(seen.setdefault(r[a], r[b]) == r[b] for r in rows):
                deps.append(b)
        out[a] = tuple(deps)
    return out


def near_unique_columns(rows: Rows, cols: Sequence[int], threshold: float) -> tuple[int, ...]:
    n = len(rows)
    if n < 2:
        return ()
    return tuple(c for c in cols if len({r[c] for r in rows}) >= threshold * n)


def ggr(rows: Rows, n_cols: int, cfg: GGRConfig = DEFAULT_GGR) -> Arrangement:
    """Send order and per-row column order of `rows` (each row a tuple of n_cols strings)."""
    cols = tuple(range(n_cols))
    if not rows:
        return []
    last = near_unique_columns(rows, cols, cfg.near_unique)
    group_cols = tuple(c for c in cols if c not in last)
    fds = functional_dependencies(rows, group_cols)
    solver = _Solver(rows, fds, cfg)
    base = fixed_order(rows, n_cols)
    idx = sort_rows(rows, base)
    out: Arrangement = []
    for lo in range(0, len(idx), cfg.split_rows):
        out.extend(solver.solve(idx[lo:lo + cfg.split_rows], group_cols, 0))
    tail = tuple(sorted(last))
    return [(i, order + tail) for i, order in out]


class _Solver:
    def __init__(self, rows: Rows, fds: dict[int, tuple[int, ...]], cfg: GGRConfig) -> None:
        self.rows = rows
        self.fds = fds
        self.cfg = cfg

    def fallback(self, idx: Sequence[int], cols: tuple[int, ...]) -> Arrangement:
        sub = [self.rows[i] for i in idx]
        local = fixed_order([tuple(r[c] for c in cols) for r in sub], len(cols))
        order = tuple(cols[k] for k in local)
        return [(i, order) for i in sort_rows(self.rows, order, idx)]

    def solve(self, idx: Sequence[int], cols: tuple[int, ...], depth: int) -> Arrangement:
        if not cols:
            return [(i, ()) for i in idx]
        if depth >= self.cfg.max_depth or len(idx) < self.cfg.min_group:
            return self.fallback(idx, cols)
        rows = self.rows
        members: dict[tuple[int, str], list[int]] = defaultdict(list)
        counts: Counter[tuple[int, str]] = Counter()
        for i in idx:
            r = rows[i]
            for c in cols:
                members[(c, r[c])].append(i)
                counts[(c, r[c])] += 1
        fd_len = {}
        heap: list[tuple[int, int, str]] = []
        for (c, v), n in counts.items():
            if n >= 2:
                first = members[(c, v)][0]
                fd_len[(c, v)] = len(v) + sum(len(rows[first][b]) for b in self.fds.get(c, ()) if b in cols)
                heap.append((-ggr_value_score(fd_len[(c, v)], n), c, v))
        heapq.heapify(heap)
        left = dict.fromkeys(idx)  # insertion-ordered set: the rows not grouped yet
        out: Arrangement = []
        while heap and left:
            neg, c, v = heapq.heappop(heap)
            n = counts[(c, v)]
            score = ggr_value_score(fd_len[(c, v)], n) if n >= 1 else 0
            if n < 2 or score <= 0:
                continue
            if -neg != score:  # stale: rows were taken by an earlier group
                heapq.heappush(heap, (-score, c, v))
                continue
            group = [i for i in members[(c, v)] if i in left]
            for i in group:
                del left[i]
                r = rows[i]
                for cc in cols:
                    counts[(cc, r[cc])] -= 1
            head = (c,) + tuple(b for b in self.fds.get(c, ()) if b in cols)
            rest = tuple(cc for cc in cols if cc not in head)
            for i, order in self.solve(group, rest, depth + 1):
                out.append((i, head + order))
        if left:
            out.extend(self.fallback(list(left), cols))
        return out
