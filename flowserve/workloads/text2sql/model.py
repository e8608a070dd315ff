"""The CHESS Text-to-SQL stage model: stage names, per-database prompt and output shapes
fitted to the real traces, revise-round and evaluation-count distributions.

Per-database lengths are the traces' means (Trace 1 = financial, Trace 2 = formula1),
spread log-normally with the traces' spread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

WORKFLOW = "text2sql"
IR, KW, CAND, REVISE = "information_retriever", "extract_keywords", "generate_candidate", "revise"
UT, GUT, EVAL = "unit_tester", "generate_unit_test", "evaluate"
STAGES = (IR, KW, CAND, REVISE, UT, GUT, EVAL)
EXEC = "execute_sql"
# Hexgen's four stages (its Table 1): schema linking, candidates, self-correction, evaluation.
PAPER_STAGE = {IR: "schema_linking", KW: "schema_linking", CAND: "sql_candidates",
               REVISE: "self_correction", UT: "evaluation", GUT: "evaluation", EVAL: "evaluation"}
TRACE_STEP = {"Information Retriever": IR, "extract_keywords": KW, "revise": REVISE,
              "unit_tester": UT, "generate_unit_test": GUT, "evaluate": EVAL}

# SPEC §4 means (Llama-3.1-70B on BIRD mini-dev): priors for output-length prediction.
SPEC_MEANS = {IR: (308, 5), KW: (667, 45), CAND: (11748, 678), REVISE: (5963, 79),
              UT: (275, 4), GUT: (1109, 103), EVAL: (961, 22)}


@dataclass(frozen=True)
class StageShape:
    input_mean: float
    input_sd_log: float
    output_mean: float
    output_sd_log: float
    shared: int  # tokens of the (stage, database) prefix shared by all queries


@dataclass(frozen=True)
class Database:
    name: str
    stages: Mapping[str, StageShape]
    error_prob: float  # P(SQL errs again) per revise round: capped-geometric rounds
    keyword_prob: float  # P(keyword extraction runs)
    eval_counts: Mapping[int, float]  # distribution of parallel evaluations


def _shape(i: float, isd: float, o: float, osd: float, shared: int) -> StageShape:
    return StageShape(i, isd, o, osd, shared)


# Fitted to chess-trace1.json (financial) and chess-trace2.json (formula1); the error
# probabilities solve E[min(Geometric, 10)] = 3.73 and 4.38 revise rounds.
DATABASES: dict[str, Database] = {
    "financial": Database(
        "financial",
        {IR: _shape(306, 0.01, 7, 0.55, 290), KW: _shape(669, 0.03, 44, 0.36, 630),
         CAND: _shape(10000, 0.20, 680, 0.30, 7000), REVISE: _shape(5954, 0.04, 82, 0.61, 5600),
         UT: _shape(275, 0.01, 5, 0.19, 265), GUT: _shape(1110, 0.12, 102, 0.34, 700),
         EVAL: _shape(960, 0.13, 29, 0.43, 600)},
        error_prob=0.8092, keyword_prob=0.67,
        eval_counts={0: 4, 3: 10, 4: 8, 5: 30, 6: 38},
    ),
    "formula1": Database(
        "formula1",
        {IR: _shape(306, 0.01, 8, 0.61, 290), KW: _shape(696, 0.03, 61, 0.37, 630),
         CAND: _shape(11947, 0.16, 741, 0.31, 9000), REVISE: _shape(7993, 0.04, 122, 0.86, 7500),
         UT: _shape(275, 0.01, 5, 0.19, 265), GUT: _shape(1286, 0.16, 101, 0.50, 750),
         EVAL: _shape(1268, 0.24, 31, 0.49, 600)},
        error_prob=0.8422, keyword_prob=0.92,
        eval_counts={4: 36, 5: 22, 6: 30, 8: 2, 11: 6},
    ),
}
TRACES = {"financial": ("financial",), "formula1": ("formula1",), "mixed": ("financial", "formula1")}
TRACE_DB = {"chess-trace1": "financial", "chess-financial": "financial",
            "chess-trace2": "formula1", "chess-formula1": "formula1"}


@dataclass(frozen=True)
class Text2SQLParams:
    candidates: int = 2
    max_rounds: int = 10
    exec_mean_s: float = 0.3  # SQL execution time (log-normal, sd_log 0.5)
    error_prob: float | None = None  # override every database's


def capped_rounds_mean(p: float, cap: int) -> float:
    """E[min(G, cap)] for P(G ≥ k) = p^k: Σ_{k=1..cap} p^k."""
    return p * (1 - p**cap) / (1 - p) if p < 1 else float(cap)
