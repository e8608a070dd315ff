"""The clairvoyant output predictor: knows every call's true output length (from the
workload's plans). Only benchmarks use it, as the bound a real predictor cannot beat."""

from __future__ import annotations

from collections.abc import Mapping

from flowserve.graph.replay import plan_oracle
from flowserve.profiles.predictor import OutputPredictor
from flowserve.workloads.base import Workload


class ClairvoyantPredictor(OutputPredictor):
    def __init__(self, workload: Workload, priors: Mapping[tuple[str, str], float] | None = None) -> None:
        super().__init__(priors)
        self._true = {(q.id, key): n for q in workload.queries for key, n in plan_oracle(q.plan).outputs.items()}

    def predict_call(self, query_id: int, node: str, workflow: str, stage: str) -> int:
        n = self._true.get((query_id, node))
        return max(1, n) if n is not None else self.predict(workflow, stage)
