"""`flowserve bench llmsql-reorder`: how often reordering a row's fields changes a real
model's answer — the paper's own concern about column reordering (Liu et al. §4: the
fields are the same, only their order in the prompt changes; does the answer?).

The same `LLM_CHOICE` statement runs twice on the same engine, greedy (temperature 0), each
row's prompt as a user message in the model's chat template (`chat=True`):
with the fields in the statement's order (`optimize="none"`) and in the planner's order
(`optimize="reorder"`: ASL·N/C, the shared low-cardinality column first, so its prefix is
cached). The statement names the review first and the movie second, so the planner moves
the movie to the front of every row. Rows are matched by id; an answer is "changed" when
the two runs' answers differ (an unparsed answer is NULL and counts as an answer).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

import flowserve.sql as fsql
from flowserve.sql.tables import read_table
from flowserve.types.specs import InstanceSpec

MOVIES = Path(__file__).resolve().parents[1] / "data" / "llmsql" / "movies_small.csv"
STATEMENT = ("SELECT id, LLM_CHOICE('Positive|Negative', 'Is this review of the movie positive or negative?', "
             "review, movie) AS answer FROM reviews ORDER BY id")


def review_rows(rows: int, source: Path = MOVIES) -> pa.Table:
    """The first `rows` reviews with text: (id, review, movie), the movie a shared column."""
    table = read_table("movies", source)
    out: dict[str, list[Any]] = {"id": [], "review": [], "movie": []}
    for rec in table.to_pylist():
        if rec.get("review_content") and len(out["id"]) < rows:
            out["id"].append(int(rec["id"]))
            out["review"].append(str(rec["review_content"]))
            out["movie"].append(str(rec["movie_title"]))
    return pa.table(out)


def answers_by_id(table: pa.Table) -> dict[int, str | None]:
    """Each row's answer (NULL where the model's answer matched no label) by its id."""
    return dict(zip(table.column("id").to_pylist(), table.column("answer").to_pylist(), strict=True))


def reorder_effect(cluster: Sequence[InstanceSpec], table: pa.Table) -> dict[str, Any]:
    """Both runs' answers per row, and how many the reordering changed."""
    answers: dict[str, dict[int, str | None]] = {}
    reports: dict[str, dict[str, Any]] = {}
    for optimize in ("none", "reorder"):
        con = fsql.connect(cluster=list(cluster), optimize=optimize, tables={"reviews": table}, chat=True)
        try:
            res = con.sql(STATEMENT)
        finally:
            con.close()
        answers[optimize] = answers_by_id(res.table)
        reports[optimize] = {k: res.report.get(k) for k in ("statement_wall_s", "calls_sent", "token_hit_rate")}
    ids = sorted(answers["none"])
    changed = [i for i in ids if answers["none"][i] != answers["reorder"][i]]
    return {
        "statement": STATEMENT, "rows": len(ids), "changed": len(changed),
        "changed_share": len(changed) / len(ids) if ids else 0.0,
        "transitions": {f"{a} → {b}": n for (a, b), n in
                        Counter((answers["none"][i], answers["reorder"][i]) for i in ids).most_common()},
        "answers": {"statement_order": dict(Counter(answers["none"].values())),
                    "planner_order": dict(Counter(answers["reorder"].values()))},
        "changed_ids": changed, "runs": reports,
    }
