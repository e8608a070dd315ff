"""Per-tenant service accounts: virtual token counters (Sheng et al., "Fairness in Serving
Large Language Models", OSDI '24, Alg. 2 "VTC").

The core charges each tenant the tokens the engines serve it — prompt tokens when a
call starts (the uncached part: what the engine computes), output tokens when it
finishes — divided by the tenant's weight; a queue policy that wants weighted fair
shares serves the backlogged tenant with the smallest counter first. A tenant that
(re)joins the backlog is lifted to the smallest counter among the backlogged tenants,
so idle time earns no credit (VTC's counter lift). Raw tokens per tenant are kept for
metrics (`served`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

DEFAULT_PROMPT_WEIGHT = 1.0  # VTC's w_p: cost of a prompt token
DEFAULT_OUTPUT_WEIGHT = 2.0  # VTC's w_q: cost of an output token (the paper's default ratio)


def parse_weights(spec: str | Mapping[str, Any]) -> dict[str, float]:
    """'gold:3,free:1' or {'gold': 3, 'free': 1} → {'gold': 3.0, 'free': 1.0}; raises
    ValueError on a bad entry."""
    if isinstance(spec, Mapping):
        return {_tenant(name): _weight(name, w) for name, w in spec.items()}
    out: dict[str, float] = {}
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.rpartition(":")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"tenant weight {part!r}: expected name:weight")
        try:
            w = float(value)
        except ValueError:
            raise ValueError(f"tenant weight {part!r}: {value!r} is not a number") from None
        out[name] = _weight(part, w)
    return out


class TenantShares:
    """What policies may read of the ledger: weighted counters, weights and tokens served."""

    __slots__ = ("_ledger",)

    def __init__(self, ledger: TenantLedger) -> None:
        self._ledger = ledger

    def counter(self, tenant: str) -> float:
        return self._ledger.counters.get(tenant, 0.0)

    def weight(self, tenant: str) -> float:
        return self._ledger.weights.get(tenant, 1.0)

    @property
    def served(self) -> Mapping[str, Mapping[str, int]]:
        return MappingProxyType(self._ledger.served)
def _tenant(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"tenant weight: the tenant name must be a non-empty string, got {name!r}")
    return name.strip()


def _weight(entry: Any, w: Any) -> float:
    if isinstance(w, bool) or not isinstance(w, int | float) or not w > 0 or w != w or w == float("inf"):
        raise ValueError(f"tenant weight {entry!r}: the weight must be a positive finite number, got {w!r}")
    return float(w)


class TenantLedger:
    """The core's accounts (only the core writes them; policies read `shares`)."""

    def __init__(self, weights: Mapping[str, float] | None = None, prompt_weight: float = DEFAULT_PROMPT_WEIGHT,
                 output_weight: float = DEFAULT_OUTPUT_WEIGHT) -> None:
        self.weights: dict[str, float] = dict(weights or {})
        self.prompt_weight = prompt_weight
        self.output_weight = output_weight
        self.counters: dict[str, float] = {}  # weighted virtual token counters
        self.costs: dict[str, float] = {}  # this scheduler's own charges, unweighted (what replicas share)
        self.served: dict[str, dict[str, int]] = {}  # tenant → {"prompt": n, "output": n, "calls": n}
        self.shares = TenantShares(self)

    def set_weights(self, weights: Mapping[str, float]) -> None:
        """The weights a queue policy was configured with (every instance's queue has the same)."""
        assert not self.weights or dict(weights) == self.weights, "instances' queues disagree on tenant weights"
        self.weights = dict(weights)

    def weight(self, tenant: str) -> float:
        return self.weights.get(tenant, 1.0)

    def counter(self, tenant: str) -> float:
        return self.counters.get(tenant, 0.0)

    def _charge(self, tenant: str, cost: float) -> None:
        self.counters[tenant] = self.counter(tenant) + cost / self.weight(tenant)
        self.costs[tenant] = self.costs.get(tenant, 0.0) + cost

    def peer_charge(self, tenant: str, cost: float) -> None:
        """Service another replica gave the tenant (`cost` more since its last report)."""
        self.counters[tenant] = self.counter(tenant) + cost / self.weight(tenant)

    def started(self, tenant: str, prompt_tokens: int) -> None:
        self._charge(tenant, self.prompt_weight * prompt_tokens)
        s = self.served.setdefault(tenant, {"prompt": 0, "output": 0, "calls": 0})
        s["prompt"] += prompt_tokens
        s["calls"] += 1

    def finished(self, tenant: str, output_tokens: int) -> None:
        self._charge(tenant, self.output_weight * output_tokens)
        s = self.served.setdefault(tenant, {"prompt": 0, "output": 0, "calls": 0})
        s["output"] += output_tokens

    def lift(self, tenant: str, backlogged: Iterable[str]) -> None:
        """VTC counter lift when `tenant` joins the backlog: max(own, min over the others)."""
        others = [self.counter(t) for t in backlogged if t != tenant]
        if others:
            self.counters[tenant] = max(self.counter(tenant), min(others))
