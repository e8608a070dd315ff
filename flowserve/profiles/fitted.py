"""A cost model fitted to measurements of a real engine (`flowserve profile` writes it).

The iteration time is linear in the work an iteration does (SPEC §5.1, the alternative
to the roofline; Vidur and Preble fit similar models):

    t = c0 + c_prefill·[p > 0] + c_prefill_token·p + c_attended·A + c_decode_seq·d + c_decode_context·C

with p prefilled tokens, A = Σ of the context each prefilled token attends to, d decoding
sequences and C = Σ of their context lengths. `c_prefill` is the extra fixed cost of an
iteration that processes a prompt (client-observed prefill latency includes request
handling that decode steps do not pay). A prefill of fewer than `narrow_prefill_tokens`
tokens attends at the decode rate: its A counts in C instead (llama.cpp's CPU flash
attention handles fewer than 64 query rows one row at a time, like decode tokens, and
uses a tiled kernel ~3× cheaper per pair from 64 rows on; 0 disables the rule).
Coefficients are fitted by non-negative least squares on relative error (every
measurement counts by its percentage error, so millisecond decode steps weigh as much
as second-long prefills).

A profile YAML holds the model name, the device description, the model's max context,
the KV capacity in tokens, the engine's slots (concurrent sequences) and token budget per
iteration, the coefficients and the fit quality. A cluster instance with `profile:` uses
it instead of the roofline (`flowserve.cluster.roofline_for`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field

from flowserve.profiles.cost_model import IterationCostModel, prefill_attended
from flowserve.profiles.slot_config import DEFAULT_SIMILARITY, SlotConfig
from flowserve.schema import read_yaml, validate

COEFFICIENTS = ("c0", "c_prefill", "c_prefill_token", "c_attended", "c_decode_seq", "c_decode_context")
FORMAT_VERSION = 1


def iteration_features(prefill_tokens: int, attended: float, decode_seqs: int, decode_context: float,
                       narrow: int = 0) -> np.ndarray:
    """x with t = c·x: (1, [p > 0], p, A, d, C), the terms of the fitted iteration time; a
    prefill narrower than `narrow` tokens moves A to C (module docstring)."""
    if 0 < prefill_tokens < narrow:
        attended, decode_context = 0.0, decode_context + attended
    return np.array([1.0, 1.0 if prefill_tokens > 0 else 0.0, prefill_tokens, attended, decode_seqs, decode_context])


def prefill_features(new_tokens: int, cached_tokens: int, token_budget: int, narrow: int = 0) -> np.ndarray:
    """Σ of iteration features over the chunks of one prefill (chunks of `token_budget`
    tokens, as the simulated engine and llama-server's n_batch split it)."""
    total = np.zeros(len(COEFFICIENTS))
    done = 0
    while done < new_tokens:
        n = min(token_budget, new_tokens - done)
        total += iteration_features(n, prefill_attended(n, cached_tokens + done), 0, 0.0, narrow)
        done += n
    return total


@dataclass(frozen=True)
class Sample:
    """One measurement: `seconds` spent on work whose summed features are `x`."""

    kind: str  # "prefill", "cached_prefill", "decode", ...
    x: tuple[float, ...]
    seconds: float

    def __post_init__(self) -> None:
        assert len(self.x) == len(COEFFICIENTS) and self.seconds > 0


@dataclass(frozen=True)
class FitQuality:
    samples: int
    mean_abs_pct_error: float
    max_abs_pct_error: float
    r2: float
    by_kind: tuple[tuple[str, float], ...] = ()  # (kind, mean abs % error)


def fit_coefficients(samples: Sequence[Sample]) -> tuple[tuple[float, ...], FitQuality]:
    """Non-negative least squares on relative error: minimise Σ ((c·x − t) / t)², c ≥ 0."""
    if len(samples) < 2:
        raise ValueError("need at least two measurements to fit")
    x = np.array([s.x for s in samples], dtype=float)
    y = np.array([s.seconds for s in samples], dtype=float)
    a = x / y[:, None]
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0  # an unused feature keeps coefficient 0
    from scipy.optimize import nnls  # here: only profiling fits; serving and simulating load no scipy.optimize

    coef, _ = nnls(a / scale, np.ones(len(y)), maxiter=50 * a.shape[1])
    coef = coef / scale
    return tuple(float(c) for c in coef), fit_quality(samples, coef)


def fit_quality(samples: Sequence[Sample], coef: Sequence[float]) -> FitQuality:
    x = np.array([s.x for s in samples], dtype=float)
    y = np.array([s.seconds for s in samples], dtype=float)
    pred = x @ np.asarray(coef, dtype=float)
    err = np.abs(pred - y) / y * 100
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((pred - y) ** 2).sum()) / ss_tot if ss_tot > 0 else 1.0
    kinds = sorted({s.kind for s in samples})
    by_kind = tuple((k, float(np.mean([e for e, s in zip(err, samples, strict=True) if s.kind == k])))
                    for k in kinds)
    return FitQuality(len(samples), float(err.mean()), float(err.max()), r2, by_kind)


@dataclass(frozen=True)
class FittedCostModel(IterationCostModel):
    model: str
    coefficients: tuple[float, ...]
    max_context: int
    kv_capacity_tokens: int
    slots: int
    token_budget: int = 2048
    device: str = "unknown"
    quality: FitQuality | None = None
    narrow_prefill_tokens: int = 0
    request_overhead_s: float = 0.0
    slot_config: SlotConfig | None = None  # llama-server: the simulator models its slot caches

    def __post_init__(self) -> None:
        assert len(self.coefficients) == len(COEFFICIENTS), self.coefficients
        assert all(c >= 0 and math.isfinite(c) for c in self.coefficients), self.coefficients
        assert self.max_context > 0 and self.kv_capacity_tokens > 0 and self.slots > 0 and self.token_budget > 0
        assert self.narrow_prefill_tokens >= 0 and self.request_overhead_s >= 0

    def iteration_time(
        self, prefill_tokens: int, prefill_attended: float, decode_seqs: int, decode_context: float
    ) -> float:
        """The fitted linear iteration time (module docstring); 0 for an empty iteration."""
        if prefill_tokens <= 0 and decode_seqs <= 0:
            return 0.0
        c0, cp, cpt, ca, cd, cc = self.coefficients
        t = c0 + cd * decode_seqs + cc * decode_context
        if prefill_tokens > 0:
            per_pair = cc if prefill_tokens < self.narrow_prefill_tokens else ca
            t += cp + cpt * prefill_tokens + per_pair * prefill_attended
        return t

    # ------------------------------------------------------------------ YAML

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "flowserve_profile": FORMAT_VERSION, "model": self.model, "device": self.device,
            "max_context": self.max_context, "kv_capacity_tokens": self.kv_capacity_tokens,
            "slots": self.slots, "token_budget": self.token_budget, "narrow_prefill_tokens": self.narrow_prefill_tokens,
            "request_overhead_s": self.request_overhead_s,
            "coefficients": dict(zip(COEFFICIENTS, self.coefficients, strict=True)),
        }
        if self.slot_config is not None:
            out["slot_cache"] = self.slot_config.to_dict()
        if self.quality is not None:
            q = asdict(self.quality)
            q["by_kind"] = dict(self.quality.by_kind)
            out["fit"] = q
        return out

    def save(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))

    @classmethod
    def from_dict(cls, data: Any, source: str = "profile") -> FittedCostModel:
        p = validate(_ProfileFile, data, source)
        quality = None
        if p.fit is not None:
            quality = FitQuality(p.fit.samples, p.fit.mean_abs_pct_error, p.fit.max_abs_pct_error, p.fit.r2,
                                 tuple(sorted(p.fit.by_kind.items())))
        coef = tuple(getattr(p.coefficients, name) for name in COEFFICIENTS)
        slots = None
        if p.slot_cache is not None:
            c = p.slot_cache
            slots = SlotConfig(c.kv_unified, c.cache_ram_tokens, c.slot_prompt_similarity, c.cache_idle_slots)
        return cls(p.model, coef, p.max_context, p.kv_capacity_tokens, p.slots, p.token_budget, p.device, quality,
                   p.narrow_prefill_tokens, p.request_overhead_s, slots)


def load_profile(path: str | Path) -> FittedCostModel:
    """Read a profile YAML; a malformed one raises ConfigError naming the file and field."""
    return FittedCostModel.from_dict(read_yaml(path), str(path))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Coefficients(_Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    c0: float = Field(ge=0)
    c_prefill: float = Field(0.0, ge=0)
    c_prefill_token: float = Field(ge=0)
    c_attended: float = Field(ge=0)
    c_decode_seq: float = Field(ge=0)
    c_decode_context: float = Field(ge=0)


class _Fit(_Strict):
    samples: int = Field(ge=0)
    mean_abs_pct_error: float
    max_abs_pct_error: float
    r2: float
    by_kind: dict[str, float] = Field(default_factory=dict)


class _SlotCache(_Strict):
    kv_unified: bool = True
    cache_ram_tokens: int | None = Field(None, ge=0)
    slot_prompt_similarity: float = Field(DEFAULT_SIMILARITY, ge=0, le=1)
    cache_idle_slots: bool = True


class _ProfileFile(_Strict):
    flowserve_profile: int = Field(FORMAT_VERSION, ge=1, le=FORMAT_VERSION)
    model: str = Field(min_length=1)
    device: str = "unknown"
    max_context: int = Field(ge=1)
    kv_capacity_tokens: int = Field(ge=1)
    slots: int = Field(ge=1)
    token_budget: int = Field(2048, ge=16)
    narrow_prefill_tokens: int = Field(0, ge=0)
    request_overhead_s: float = Field(0.0, ge=0)
    coefficients: _Coefficients
    fit: _Fit | None = None
    slot_cache: _SlotCache | None = None
