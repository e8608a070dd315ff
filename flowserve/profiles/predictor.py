"""Output-length prediction per (workflow, stage), learned online from finished calls.

Shrinkage estimate: (k·prior + Σ observed) / (k + n). With no observations it returns
the prior; after many it returns the observed mean. The core feeds it every finished
call, so the simulator and the live gateway learn the same way.
"""

from __future__ import annotations

from collections.abc import Mapping


class OutputPredictor:
    def __init__(
        self,
        priors: Mapping[tuple[str, str], float] | None = None,
        default: float = 128.0,
        prior_weight: float = 5.0,
    ) -> None:
        self._priors = dict(priors or {})
        self._default = default
        self._k = prior_weight
        self._sum: dict[tuple[str, str], float] = {}
        self._n: dict[tuple[str, str], int] = {}
        self._memo: dict[tuple[str, str], int] = {}  # predictions until the stage observes a call

    def prior(self, workflow: str, stage: str) -> float:
        return self._priors.get((workflow, stage), self._default)

    def predict(self, workflow: str, stage: str) -> int:
        key = (workflow, stage)
        got = self._memo.get(key)
        if got is None:
            n = self._n.get(key, 0)
            mean = (self._k * self.prior(workflow, stage) + self._sum.get(key, 0.0)) / (self._k + n)
            got = self._memo[key] = max(1, round(mean))
        return got

    def predict_call(self, query_id: int, node: str, workflow: str, stage: str) -> int:
        """The prediction for one call (a clairvoyant subclass knows each call's true length)."""
        return self.predict(workflow, stage)

    def observe(self, workflow: str, stage: str, output_tokens: int) -> None:
        key = (workflow, stage)
        self._sum[key] = self._sum.get(key, 0.0) + output_tokens
        self._n[key] = self._n.get(key, 0) + 1
        self._memo.pop(key, None)

    def observations(self, workflow: str, stage: str) -> int:
        return self._n.get((workflow, stage), 0)
