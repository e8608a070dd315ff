"""The scheduler's hint for text2sql queries: the calls a query is still expected to make
(Hexgen Eq. 5's remaining work) and the per-stage output priors."""

from __future__ import annotations

from collections.abc import Mapping

from flowserve.graph.nodes import CallEstimate
from flowserve.workloads.text2sql.model import (
    CAND,
    DATABASES,
    EVAL,
    GUT,
    IR,
    KW,
    REVISE,
    SPEC_MEANS,
    STAGES,
    UT,
    WORKFLOW,
    capped_rounds_mean,
)


def expected_remaining(issued: Mapping[str, int], attrs: Mapping[str, object]) -> list[CallEstimate]:
    """Calls a text2sql query is still expected to make, from what it has issued so far.

    Known structure: 4 IR, keyword extraction (with its probability), the candidates,
    revise rounds (memoryless: Σ_{k=1..cap−r} p^k more after r), 3 unit_tester calls,
    and unit-test generation + evaluations with the database's mean count.
    """
    db = DATABASES[str(attrs.get("db", "financial"))]
    p = float(attrs.get("error_prob", db.error_prob))  # type: ignore[arg-type]
    cap = int(attrs.get("max_rounds", 10))  # type: ignore[call-overload]
    n_cand = int(attrs.get("candidates", 2))  # type: ignore[call-overload]
    weights = db.eval_counts
    total_w = sum(weights.values())
    eval_mean = sum(k * w for k, w in weights.items()) / total_w
    p_tests = 1 - weights.get(0, 0) / total_w
    after_revise = issued.get(UT, 0) > 0
    if issued.get(CAND, 0) == 0:
        rounds_left = capped_rounds_mean(p, cap)
    elif after_revise:
        rounds_left = 0.0
    else:
        r = issued.get(REVISE, 0)
        rounds_left = capped_rounds_mean(p, cap - r) if r < cap else 0.0
    expected = {
        IR: 4.0,
        KW: db.keyword_prob if issued.get(IR, 0) <= 1 else float(issued.get(KW, 0)),
        CAND: float(n_cand),
        REVISE: issued.get(REVISE, 0) + rounds_left,
        UT: 3.0,
        GUT: p_tests,
        EVAL: p_tests * eval_mean if not issued.get(EVAL) else float(issued[EVAL]),
    }
    out = []
    for stage in STAGES:
        left = expected[stage] - issued.get(stage, 0)
        if left > 1e-9:
            out.append(CallEstimate(stage, round(db.stages[stage].input_mean), None, left))
    return out


def output_priors() -> dict[tuple[str, str], float]:
    return {(WORKFLOW, s): float(o) for s, (_, o) in SPEC_MEANS.items()}
