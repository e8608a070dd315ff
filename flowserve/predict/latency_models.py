"""Learned latency models for the dispatch's latency predictor
(`flowserve.policies.slo.predictor.LatencyModel`), each on a maintained library, each
deterministic for its seed. `flowserve bench predictor` measures them side by side
(accuracy, cost per prediction and per update); docs/policies.md gives the figures and
the choice.

* `sgd` — scikit-learn's `SGDRegressor` learning online (`partial_fit`) on features a
  `StandardScaler` standardises as they come, in mini-batches of `batch` calls;
* `river` — river's online `LinearRegression` after its running `StandardScaler`, one
  call at a time;
* `lightgbm` — LightGBM gradient-boosted trees, refitted on the last `window` calls every
  `refit` calls (in the simulator at once; a server would run the refit off the decision
  path);
* `hgb_p90` — the model of llm-d's contestant (`flowserve.policies.llmd_latency`).

The libraries are imported when a model is built, so importing this module needs none.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from flowserve.errors import ConfigError

Latency = tuple[float, float]


class SGDLatency:
    """Two `SGDRegressor`s (TTFT, TPOT) on standardised features, updated every `batch` calls."""

    def __init__(self, seed: int = 0, batch: int = 8, alpha: float = 1e-4, eta0: float = 0.01) -> None:
        from sklearn.linear_model import SGDRegressor
        from sklearn.preprocessing import StandardScaler

        def reg() -> Any:
            return SGDRegressor(alpha=alpha, eta0=eta0, learning_rate="invscaling", random_state=seed)

        self._scaler = StandardScaler()
        self._ttft, self._tpot = reg(), reg()
        self._batch = batch
        self._buf: list[tuple[Sequence[float], float, float | None]] = []
        self._fitted = (False, False)
        self.samples = 0

    def learn(self, x: Sequence[float], ttft_s: float, tpot_s: float | None) -> None:
        self.samples += 1
        self._buf.append((x, ttft_s, tpot_s))
        if len(self._buf) < self._batch:
            return
        xs = np.asarray([b[0] for b in self._buf], dtype=float)
        self._scaler.partial_fit(xs)
        z = self._scaler.transform(xs)
        self._ttft.partial_fit(z, np.asarray([b[1] for b in self._buf]))
        rows = [k for k, b in enumerate(self._buf) if b[2] is not None]
        if rows:
            self._tpot.partial_fit(z[rows], np.asarray([self._buf[k][2] for k in rows]))
        self._fitted = (True, self._fitted[1] or bool(rows))
        self._buf.clear()

    def predict(self, xs: Sequence[Sequence[float]]) -> list[Latency]:
        if not self._fitted[0]:
            return [(0.0, 0.0)] * len(xs)
        # the fitted linear maps applied directly: sklearn's per-call validation costs more than the product
        z = (np.asarray(xs, dtype=float) - self._scaler.mean_) / self._scaler.scale_
        ttft = z @ self._ttft.coef_ + self._ttft.intercept_[0]
        tpot = z @ self._tpot.coef_ + self._tpot.intercept_[0] if self._fitted[1] else np.zeros(len(xs))
        return list(zip(ttft.tolist(), tpot.tolist(), strict=True))


class RiverLatency:
    """river's `StandardScaler | LinearRegression`, one pipeline per target, learned one call at a time."""

    def __init__(self, seed: int = 0, lr: float = 0.01, l2: float = 0.0) -> None:
        from river import linear_model, optim, preprocessing

        def pipe() -> Any:
            return preprocessing.StandardScaler() | linear_model.LinearRegression(optimizer=optim.SGD(lr), l2=l2)

        self._ttft, self._tpot = pipe(), pipe()
        self.samples = 0

    def learn(self, x: Sequence[float], ttft_s: float, tpot_s: float | None) -> None:
        self.samples += 1
        d = dict(enumerate(x))
        self._ttft.learn_one(d, ttft_s)
        if tpot_s is not None:
            self._tpot.learn_one(d, tpot_s)

    def predict(self, xs: Sequence[Sequence[float]]) -> list[Latency]:
        out = []
        for x in xs:
            d = dict(enumerate(x))
            out.append((float(self._ttft.predict_one(d)), float(self._tpot.predict_one(d))))
        return out


class WindowRefit:
    """A batch-trained pair of models (TTFT, TPOT) refitted on the last `window` calls every
    `refit` calls; a subclass says how one model is fitted (`_fit`: None until it can be)."""

    def __init__(self, window: int, refit: int) -> None:
        self._refit = refit
        self._rows: deque[tuple[Sequence[float], float, float | None]] = deque(maxlen=window)
        self._ttft: Any = None
        self._tpot: Any = None
        self.samples = 0

    def learn(self, x: Sequence[float], ttft_s: float, tpot_s: float | None) -> None:
        self.samples += 1
        self._rows.append((x, ttft_s, tpot_s))
        if self.samples % self._refit == 0:
            self._ttft = self._fit([(r[0], r[1]) for r in self._rows])
            self._tpot = self._fit([(r[0], r[2]) for r in self._rows if r[2] is not None])

    def _fit(self, rows: list[tuple[Sequence[float], float]]) -> Any:
        raise NotImplementedError

    def _predicted(self, arr: np.ndarray) -> list[Latency]:
        n = len(arr)
        ttft = self._ttft.predict(arr) if self._ttft is not None else np.zeros(n)
        tpot = self._tpot.predict(arr) if self._tpot is not None else np.zeros(n)
        return list(zip(ttft.tolist(), tpot.tolist(), strict=True))


class LightGBMLatency(WindowRefit):
    """LightGBM boosters (TTFT, TPOT) refitted on the last `window` calls every `refit` calls."""

    def __init__(self, seed: int = 0, window: int = 2000, refit: int = 200, rounds: int = 40) -> None:
        if "usearch" in sys.modules and "lightgbm" not in sys.modules:
            # usearch's C++ runtime, loaded first, breaks LightGBM's feature names ('Column_' twice)
            raise ConfigError("the lightgbm latency model needs lightgbm imported before usearch (the gateway's "
                              "vector index) in this process")
        import lightgbm

        self._lgb = lightgbm
        self._params = {"objective": "regression", "num_leaves": 15, "learning_rate": 0.1, "min_data_in_leaf": 10,
                        "verbose": -1, "deterministic": True, "force_row_wise": True, "num_threads": 1,
                        "seed": seed}
        self._rounds = rounds
        super().__init__(window, refit)

    def _fit(self, rows: list[tuple[Sequence[float], float]]) -> Any:
        if len(rows) < 2 * self._params["min_data_in_leaf"]:
            return None
        xs = np.asarray([r[0] for r in rows], dtype=float)
        data = self._lgb.Dataset(xs, np.asarray([r[1] for r in rows]), params={"verbose": -1},
                                 feature_name=[f"x{k}" for k in range(xs.shape[1])])
        return self._lgb.train(self._params, data, num_boost_round=self._rounds)

    def predict(self, xs: Sequence[Sequence[float]]) -> list[Latency]:
        return self._predicted(np.asarray(xs, dtype=float))


class QuantileBoostLatency(WindowRefit):
    """llm-d's sidecar model: gradient-boosted trees of the p90 (`quantile`) TTFT and TPOT —
    scikit-learn's `HistGradientBoostingRegressor` with the quantile loss, as XGBoost's
    quantile objective there — retrained on the last `window` calls every `refit` calls."""

    def __init__(self, seed: int = 0, window: int = 5000, refit: int = 100, quantile: float = 0.9,
                 rounds: int = 50) -> None:
        from sklearn.ensemble import HistGradientBoostingRegressor
        from threadpoolctl import threadpool_limits

        # one thread: its OpenMP threads on a busy machine made every fit and prediction ~100× slower
        self._one_thread = lambda: threadpool_limits(1, user_api="openmp")

        def reg() -> Any:
            return HistGradientBoostingRegressor(loss="quantile", quantile=quantile, max_iter=rounds,
                                                 random_state=seed)

        self._new = reg
        super().__init__(window, refit)

    def _fit(self, rows: list[tuple[Sequence[float], float]]) -> Any:
        if len(rows) < 20:
            return None
        with self._one_thread():
            return self._new().fit(np.asarray([r[0] for r in rows], dtype=float), np.asarray([r[1] for r in rows]))

    def predict(self, xs: Sequence[Sequence[float]]) -> list[Latency]:
        with self._one_thread():
            return self._predicted(np.asarray(xs, dtype=float))


LATENCY_MODELS: dict[str, Callable[[int], Any]] = {
    "sgd": SGDLatency,
    "river": RiverLatency,
    "lightgbm": LightGBMLatency,
    "hgb_p90": QuantileBoostLatency,  # llm-d's contestant (`llmd_slo`)
}
