"""The critical-path bound: each query's latency with unlimited instances.

No scheduler can finish a query sooner than its graph's longest path, each step taking
its own time under the cost model (an LLM call alone on an instance, an op alone on
its engine). The simulator computes it by running every query alone — queries spaced
so none overlaps another — on a cluster where each LLM instance is copied `copies`
times and each non-LLM engine runs `copies` times as many batches at once, each op in
a batch of its own: every step that is ready starts at once on an idle instance. The
graph is the one the policy's passes produce, so the bound follows the passes (a better
e-graph lowers it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from flowserve.profiles.ops import op_profile
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.base import Workload

COPIES = 8  # more instances of each kind than any query of the built-in apps runs steps at once
GAP_S = 1e5  # virtual seconds between two queries: longer than any query


def unlimited(cluster: Sequence[InstanceSpec], copies: int = COPIES) -> list[InstanceSpec]:
    """Each LLM instance `copies` times; each non-LLM engine with `copies` times its batch
    slots, one op a batch (as many instances would run them)."""
    out: list[InstanceSpec] = []
    for s in cluster:
        if s.kind == "llm":
            out.extend(dataclasses.replace(s, name=f"{s.name}~{i}") for i in range(copies))
        else:
            prof = s.op_profile or op_profile(s.kind)
            wide = dataclasses.replace(prof, concurrency=prof.concurrency * copies, max_ops=1)
            out.append(dataclasses.replace(s, op_profile=wide))
    return out


def critical_path_latencies(cluster: Sequence[InstanceSpec], workload: Workload, policy: PolicySpec,
                            copies: int = COPIES) -> list[float | None]:
    """Per query (in workload order), its latency alone with unlimited instances (None:
    the query failed); `copies` 1: alone on the cluster as it is."""
    alone = dataclasses.replace(workload, queries=tuple(
        dataclasses.replace(q, arrival=i * GAP_S) for i, q in enumerate(workload.queries)))
    wide = cluster if copies == 1 else unlimited(cluster, copies)
    res = simulate(wide, alone, policy, standalone=[1.0] * len(alone.queries), record_calls=False)
    by_id = {q.id: (None if q.failed else q.latency) for q in res.queries}
    return [by_id[q.id] for q in workload.queries]
