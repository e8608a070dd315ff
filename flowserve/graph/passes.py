"""Graph passes: pure functions that rewrite each batch of nodes a query reveals.

The runtime runs the configured passes, in order, on every batch a workflow hook adds
(at the start and at run time), before the batch is checked and issued. A pass sees
the new nodes and the graph so far (read-only) and returns the nodes to add instead:
it may split, merge, annotate or re-wire them, never touch nodes already issued.
Passes are registered by name and chosen by a config string (`--passes a,b`).
"""

from __future__ import annotations

from collections.abc import Sequence

from flowserve.errors import ConfigError
from flowserve.graph import optimize
from flowserve.graph.optimize import GraphPass, PassContext

__all__ = ["PASSES", "GraphPass", "PassContext", "make_passes"]

# Teola's four passes (`flowserve.graph.optimize`), in the order `all` runs them.
PASSES: dict[str, GraphPass] = {
    "prune": optimize.prune_dependencies,
    "decompose": optimize.decompose_stages,
    "prefill_split": optimize.split_prefill,
    "pipeline": optimize.pipeline_decode,
}


def make_passes(spec: str | Sequence[str] | None) -> tuple[GraphPass, ...]:
    """'none', 'all', or a comma-separated list of registered pass names (in order)."""
    if spec is None:
        return ()
    names = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else list(spec)
    names = [n for n in names if n and n != "none"]
    if names == ["all"]:
        names = list(PASSES)
    unknown = [n for n in names if n not in PASSES]
    if unknown:
        raise ConfigError(f"unknown graph pass(es) {unknown}; known: {', '.join(PASSES) or 'none'}")
    return tuple(PASSES[n] for n in names)
