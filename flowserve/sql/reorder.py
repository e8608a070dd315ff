"""Column reordering with one fixed order for all rows, and row sorting (paper §4.2–4.3)."""

from __future__ import annotations

from collections.abc import Sequence

Rows = Sequence[Sequence[str]]


def column_score(avg_len: float, rows: int, cardinality: int) -> float:
    """score(col) = ASL(col) · N / C(col) (Liu et al. §4.2, column reordering)."""
    assert cardinality >= 1 and rows >= cardinality, (rows, cardinality)
    return avg_len * rows / cardinality


def column_stats(rows: Rows, col: int) -> tuple[float, int]:
    """(average string length, cardinality) of one column."""
    values = [r[col] for r in rows]
    return sum(len(v) for v in values) / max(1, len(values)), len(set(values))


def fixed_order(rows: Rows, n_cols: int) -> tuple[int, ...]:
    """Columns by descending ASL·N/C (ties: argument order)."""
    if not rows:
        return tuple(range(n_cols))
    scores = []
    for c in range(n_cols):
        asl, card = column_stats(rows, c)
        scores.append(column_score(asl, len(rows), card))
    return tuple(sorted(range(n_cols), key=lambda c: (-scores[c], c)))


def sort_rows(rows: Rows, order: Sequence[int], subset: Sequence[int] | None = None) -> list[int]:
    """Row indices sorted lexicographically on the fields in `order`, so rows that share
    leading fields are adjacent (paper §4.3); stable on the original order."""
    idx = list(range(len(rows))) if subset is None else list(subset)
    idx.sort(key=lambda i: tuple(rows[i][c] for c in order))
    return idx
