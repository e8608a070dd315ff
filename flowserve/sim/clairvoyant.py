"""The clairvoyant output predictor: knows every call's true output length (each query's
oracle: a plan's recorded lengths, an app's simulated ones). Only benchmarks use it, as
the bound a real predictor cannot beat."""

from __future__ import annotations

from collections.abc import Mapping

from flowserve.graph.oracle import Oracle
from flowserve.graph.replay import plan_oracle
from flowserve.profiles.predictor import OutputPredictor
from flowserve.workloads.base import AppQuery, Workload


class ClairvoyantPredictor(OutputPredictor):
    def __init__(self, workload: Workload, priors: Mapping[tuple[str, str], float] | None = None) -> None:
        super().__init__(priors)
        self._oracles: dict[int, Oracle] = {
            q.id: q.plan.oracle if isinstance(q.plan, AppQuery) else plan_oracle(q.plan) for q in workload.queries}

    def predict_call(self, query_id: int, node: str, workflow: str, stage: str) -> int:
        oracle = self._oracles.get(query_id)
        n = oracle.output_tokens(node) if oracle is not None else None
        return max(1, n) if n is not None else self.predict(workflow, stage)
