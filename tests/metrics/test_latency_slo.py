"""The share of requests meeting both their TTFT and TPOT objectives, by hand."""

from __future__ import annotations

from flowserve.core.records import CallRecord
from flowserve.errors import FailureKind
from flowserve.metrics.summary import latency_slo_attainment
from flowserve.sim.simulator import QueryOutcome, SimResult
from flowserve.types.work import LatencySLO

SLO = LatencySLO(ttft_s=1.0, tpot_s=0.1)


def outcome(qid: int, slo: LatencySLO | None, failed: FailureKind | None = None) -> QueryOutcome:
    return QueryOutcome(qid, "chat", 0.0, 5.0, 5.0, 1.0, None, None, None if failed is None else "x", slo, failed)


def record(qid: int, first_token: float | None, finished: float, out: int, ready: float = 0.0) -> CallRecord:
    return CallRecord(qid, qid, "chat", "answer", "a", 100, out, 0, ready, ready, ready, ready, first_token,
                      finished, 0, 1)


def test_a_request_meets_its_objectives_only_when_every_call_does() -> None:
    queries = [outcome(1, SLO), outcome(2, SLO), outcome(3, SLO), outcome(4, SLO, FailureKind.SHED),
               outcome(5, None), outcome(6, SLO)]
    calls = [
        record(1, 0.9, 0.9 + 0.1 * 10, 11),  # TTFT 0.9, TPOT 0.1: met
        record(2, 1.2, 1.3, 2),  # TTFT 1.2: missed
        record(3, 0.5, 0.6, 2), record(3, 2.5, 5.0, 6, ready=2.0),  # its second call's TPOT is 0.5: missed
        record(5, 9.0, 99.0, 2),  # no objectives: not counted
        record(6, 0.5, 0.5, 1),  # one token: TTFT alone decides, met
    ]
    result = SimResult(queries, calls, [], [], 5.0, 0.0, 0, 0)
    got = latency_slo_attainment(result)
    assert got == {"requests": 5, "met": 2, "share_met": 0.4, "shed": 1, "shed_share": 0.2}
