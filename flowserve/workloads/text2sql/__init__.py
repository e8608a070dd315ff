"""CHESS-style Text-to-SQL workloads: the stage model (`model`), the synthetic generator
(`generator`), replay of the real traces (`replay`) and the scheduler's hint of the
expected remaining calls (`remaining`)."""

from flowserve.workloads.text2sql.generator import PromptBuilder, generate_plan, synthetic
from flowserve.workloads.text2sql.model import (
    CAND,
    DATABASES,
    EVAL,
    EXEC,
    GUT,
    IR,
    KW,
    PAPER_STAGE,
    REVISE,
    SPEC_MEANS,
    STAGES,
    TRACE_DB,
    TRACE_STEP,
    TRACES,
    UT,
    WORKFLOW,
    Database,
    StageShape,
    Text2SQLParams,
    capped_rounds_mean,
)
from flowserve.workloads.text2sql.remaining import expected_remaining, output_priors
from flowserve.workloads.text2sql.replay import chess_trace, load_trace_file, trace_plan

__all__ = [
    "CAND", "DATABASES", "EVAL", "EXEC", "GUT", "IR", "KW", "PAPER_STAGE", "REVISE", "SPEC_MEANS", "STAGES",
    "TRACES", "TRACE_DB", "TRACE_STEP", "UT", "WORKFLOW", "Database", "PromptBuilder", "StageShape",
    "Text2SQLParams", "capped_rounds_mean", "chess_trace", "expected_remaining", "generate_plan",
    "load_trace_file", "output_priors", "synthetic", "trace_plan",
]
