"""Autellix's data-locality-aware load balancer (Luo et al., 2025, "Autellix: An Efficient
Serving Engine for LLM Agents as General Programs", §4.3): a call with a long prompt —
more than `locality_tokens`, enough context to be worth reusing — goes to the engine that
ran its program's previous call, where that context is cached; a short call, and a
program's first, goes to the least loaded engine (fewest calls queued and running)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.policy import DispatchPolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView


def load(inst: InstanceState) -> int:
    """Calls waiting at or running on the instance."""
    return len(inst.queue) + len(inst.running)


class AutellixBalancer(DispatchPolicy):
    name = "autellix"
    shares_prefills = False  # as published: every call is dispatched at once

    def __init__(self, locality_tokens: Annotated[int, Help("a call with more prompt tokens than this goes to "
                                                            "the instance of its program's previous call")]
                 = 2048) -> None:
        if locality_tokens < 0:
            raise ValueError(f"locality_tokens must be ≥ 0, got {locality_tokens}")
        self.locality_tokens = locality_tokens

    def choose(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> InstanceState:
        home = cs.query.last_instance
        if home is not None and cs.input_tokens > self.locality_tokens:
            for inst in candidates:
                if inst.name == home:
                    return inst
        return min(candidates, key=lambda i: (load(i), i.dispatched))
