"""Arrival processes: Poisson (exponential gaps) and Gamma (gaps with a chosen CV)."""

from __future__ import annotations

import numpy as np

from flowserve.errors import ConfigError


def arrival_times(rng: np.random.Generator, n: int, rate: float, process: str = "poisson",
                  cv: float | None = None, start: float = 0.0) -> np.ndarray:
    """n arrival times at `rate` per second; Gamma gaps have shape 1/cv², mean 1/rate."""
    if rate <= 0:
        raise ConfigError(f"arrival rate must be positive, got {rate}")
    if process == "poisson":
        gaps = rng.exponential(1.0 / rate, n)
    elif process == "gamma":
        if cv is None or cv <= 0:
            raise ConfigError(f"gamma arrivals need a positive cv, got {cv}")
        shape = 1.0 / cv**2
        gaps = rng.gamma(shape, 1.0 / (rate * shape), n)
    else:
        raise ConfigError(f"unknown arrival process {process!r}; known: poisson, gamma")
    return start + np.cumsum(gaps)
