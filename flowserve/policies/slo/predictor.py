"""An online predictor of each instance's TTFT and TPOT for a call, learned from the calls
that end — cheap enough for every dispatch decision.

At each decision the predictor keeps the features of the call on the instance it went to
(`remember`); when the engine reports the call finished (`learn_from`, an event the
dispatch policy observes) it learns the measured TTFT and TPOT against them. Time comes
only from the events' timestamps, never a clock, and every model is deterministic for
its seed, so a simulation replays exactly.

The regression is a `LatencyModel` (the protocol below): `analytic` learns nothing and
predicts the cost model's own estimate (`flowserve.policies.slo.features.analytic_latency`);
the learned models live outside the core (`flowserve.predict`, scikit-learn and friends),
named by their registry name or an import path, and are loaded only when a policy uses
them, so the core imports with numpy alone. One model per *group* of instances: per
hardware profile (GPU type, model, TP: instances of one profile share what they teach),
or one for the pool (`group="pool"`, llm-d's design). While a group's model has seen
fewer than `warmup` calls, the predictor answers with `fallback` (the analytic estimate).
With `residual`, a model learns what the analytic estimate misses rather than the whole
latency, so it starts from the cost model instead of from zero.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Literal, Protocol

from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.errors import ConfigError
from flowserve.plugins import is_import_path, load_object
from flowserve.policies.slo.features import analytic_latency, call_features, observed_latency
from flowserve.types.events import CallFailed, CallFinished, Event

Features = Callable[[CallState, InstanceState, ClusterView], tuple[float, ...]]
Latency = tuple[float, float]  # (TTFT s, TPOT s)
PENDING_MAX = 1 << 16  # decisions remembered at most (calls that never end are forgotten, oldest first)
MODELS_REGISTRY = "flowserve.predict.latency_models:LATENCY_MODELS"


class LatencyModel(Protocol):
    """A regression of (TTFT, TPOT) on feature vectors, learned one call at a time."""

    @property
    def samples(self) -> int:
        """Calls learned so far."""
        ...

    def learn(self, x: Sequence[float], ttft_s: float, tpot_s: float | None) -> None:
        """One finished call: its features and measured latencies (TPOT None: one output token)."""
        ...

    def predict(self, xs: Sequence[Sequence[float]]) -> list[Latency]:
        """(TTFT, TPOT) for each feature vector."""
        ...


class LatencyModelFactory(Protocol):
    def __call__(self, seed: int) -> LatencyModel: ...


def latency_model_factory(name: str | LatencyModelFactory) -> LatencyModelFactory | None:
    """The factory a model name means: None for `analytic`; a name of `flowserve.predict`'s
    registry; or an import path `package.module:factory` (a factory itself: as it is)."""
    if not isinstance(name, str):
        return name
    if name == "analytic":
        return None
    if is_import_path(name):
        return load_object(name, "latency model")
    registry = load_object(MODELS_REGISTRY, "the latency models")  # scikit-learn and friends, outside the core
    if name not in registry:
        raise ConfigError(f"unknown latency model {name!r}; known: analytic, {', '.join(registry)}, or an import "
                          "path 'package.module:factory'")
    return registry[name]


def by_profile(inst: InstanceState) -> Hashable:
    """Instances of one hardware profile (GPU type, model, TP) share a model."""
    return inst.profile


def whole_pool(inst: InstanceState) -> Hashable:
    """One model for every instance (llm-d's predictor)."""
    return "pool"


class LatencyPredictor:
    """Per-candidate (TTFT, TPOT) predictions, learned online (module docstring)."""

    def __init__(self, model: str | LatencyModelFactory = "analytic", seed: int = 0, warmup: int = 32,
                 group: Literal["profile", "pool"] = "profile", features: Features = call_features,
                 fallback: Callable[[tuple[float, ...]], Latency] | None = analytic_latency,
                 residual: bool = True) -> None:
        if warmup < 0:
            raise ValueError(f"warmup must be ≥ 0, got {warmup}")
        self._factory = latency_model_factory(model)
        self._seed = seed
        self.warmup = warmup
        self._group = by_profile if group == "profile" else whole_pool
        self._features = features
        self._fallback = fallback
        self._residual = residual and fallback is not None
        self._models: dict[Hashable, LatencyModel] = {}
        # call id → (instance, group, features, decision time)
        self._pending: dict[int, tuple[str, Hashable, tuple[float, ...], float]] = {}
        self.learned = 0

    def _model(self, key: Hashable) -> LatencyModel | None:
        """The group's model, made on first use (None: the analytic estimate, no model)."""
        if self._factory is None:
            return None
        model = self._models.get(key)
        if model is None:
            model = self._models[key] = self._factory(self._seed + len(self._models))
        return model

    def ready(self, inst: InstanceState) -> bool:
        """Whether predictions for `inst` come from a learned model (False: the fallback, or none)."""
        model = self._model(self._group(inst))
        return model is not None and model.samples >= self.warmup

    def predict(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> list[Latency | None]:
        """(TTFT, TPOT) of the call on each candidate; None where neither a learned model
        nor a fallback can say (a pool model still warming up, without a fallback)."""
        xs = [self._features(cs, inst, view) for inst in candidates]
        out: list[Latency | None] = [None] * len(candidates)
        todo: dict[Hashable, list[int]] = {}
        for k, inst in enumerate(candidates):
            if self.ready(inst):
                todo.setdefault(self._group(inst), []).append(k)
            elif self._fallback is not None:
                out[k] = self._fallback(xs[k])
        for key, ks in todo.items():
            for k, (ttft, tpot) in zip(ks, self._models[key].predict([xs[k] for k in ks]), strict=True):
                if self._residual:
                    base = self._fallback(xs[k])  # type: ignore[misc]  (residual implies a fallback)
                    ttft, tpot = ttft + base[0], tpot + base[1]
                out[k] = (max(ttft, 0.0), max(tpot, 0.0))
        return out

    def remember(self, cs: CallState, inst: InstanceState, view: ClusterView) -> None:
        """The call goes to `inst` now: keep its features there until it ends."""
        if self._factory is None:
            return  # the analytic estimate learns nothing
        pending = self._pending
        if len(pending) >= PENDING_MAX:
            del pending[next(iter(pending))]
        pending[cs.id] = (inst.name, self._group(inst), self._features(cs, inst, view), view.now)

    def learn_from(self, event: Event) -> None:
        """A call ended: a finished one on the instance it was sent to teaches its group's model."""
        if isinstance(event, CallFailed):
            self._pending.pop(event.call_id, None)
        if not isinstance(event, CallFinished) or self._factory is None:
            return
        entry = self._pending.pop(event.call_id, None)
        if entry is None or entry[0] != event.instance:
            return
        _, key, x, decided = entry
        seen = observed_latency(event, decided)
        if seen.ttft_s is None:
            return
        ttft, tpot = seen.ttft_s, seen.tpot_s
        if self._residual:
            base = self._fallback(x)  # type: ignore[misc]
            ttft -= base[0]
            tpot = None if tpot is None else tpot - base[1]
        model = self._model(key)
        if model is not None:  # always: only a model's predictor keeps pending calls
            model.learn(x, ttft, tpot)
        self.learned += 1
