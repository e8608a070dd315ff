"""Admission control: whether the gateway takes a query now, decided on the core's state.

A query is refused — never queued without bound — with 503 while the gateway drains,
429 when `max_queries` are open, and 429 with `Retry-After` (the predicted excess, at
least 1 s) when the work already promised to the best instance serving its model
exceeds `max_queue_s` (Hexgen's t_queue, from the core's query API).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from flowserve.host.query import Rejected


class Admission:
    def __init__(self, max_queries: int, max_queue_s: float | None,
                 predicted_wait_s: Callable[[str | None], float | None]) -> None:
        self.max_queries = max_queries
        self.max_queue_s = max_queue_s
        self._wait = predicted_wait_s

    def check(self, open_queries: int, model: str | None, draining: bool) -> Rejected | None:
        """None to accept, else the refusal to answer with."""
        if draining:
            return Rejected(503, "the gateway is shutting down")
        if open_queries >= self.max_queries:
            return Rejected(429, f"{open_queries} queries are in flight (max_queries {self.max_queries})", 1.0)
        if self.max_queue_s is not None:
            wait = self._wait(model)
            if wait is not None and wait > self.max_queue_s:
                return Rejected(429, f"predicted queueing of {wait:.1f} s exceeds the bound of "
                                     f"{self.max_queue_s:g} s", max(1.0, math.ceil(wait - self.max_queue_s)))
        return None
