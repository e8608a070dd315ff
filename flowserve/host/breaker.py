"""Per-instance circuit breaker and retry back-off (pure: times are passed in).

closed → `failures` consecutive transport failures → open (the driver reports
InstanceDown, the core moves the instance's calls elsewhere) → after `cooldown_s` a probe
may run (half-open) → success closes it (InstanceUp), failure re-opens it with the
cooldown doubled up to `max_cooldown_s`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

State = Literal["closed", "open", "half_open"]


def backoff_delay(attempt: int, base_s: float, cap_s: float) -> float:
    """Exponential back-off before retry number `attempt` (1-based): base · 2^(attempt−1), capped."""
    assert attempt >= 1
    return min(cap_s, base_s * 2 ** (attempt - 1))


@dataclass
class CircuitBreaker:
    failures: int = 3
    cooldown_s: float = 1.0
    max_cooldown_s: float = 30.0
    state: State = "closed"
    consecutive: int = 0
    opened_at: float = 0.0
    current_cooldown: float = 0.0
    trips: int = 0

    def record_success(self) -> bool:
        """A call succeeded; True if this closed an open circuit."""
        was_open = self.state != "closed"
        self.state = "closed"
        self.consecutive = 0
        self.current_cooldown = 0.0
        return was_open

    def record_failure(self, now: float) -> bool:
        """A transport failure; True if this opened the circuit."""
        if self.state != "closed":
            return False
        self.consecutive += 1
        if self.consecutive < self.failures:
            return False
        self.trip(now)
        return True

    def trip(self, now: float) -> None:
        self.state = "open"
        self.opened_at = now
        self.current_cooldown = self.cooldown_s
        self.trips += 1

    def probe_at(self) -> float:
        """When the next half-open probe may run."""
        return self.opened_at + self.current_cooldown

    def begin_probe(self) -> None:
        assert self.state == "open"
        self.state = "half_open"

    def probe_failed(self, now: float) -> None:
        assert self.state == "half_open"
        self.state = "open"
        self.opened_at = now
        self.current_cooldown = min(self.max_cooldown_s, self.current_cooldown * 2)
