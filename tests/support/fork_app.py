"""A two-branch app on a three-instance cluster whose schedules are computed by hand: the
critical-path bound's tests (`tests/sim`) and `bench teola`'s baselines (`tests/bench`)."""

from __future__ import annotations

from flowserve.graph.workflow import Graph, Workflow
from flowserve.profiles.ops import OpProfile
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.base import AppQuery, QuerySpec, Workload

CLUSTER = (InstanceSpec("llm", "A100-80G", "llama-3.1-8b"),
           InstanceSpec("emb", "", "embedding", kind="embedding", op_profile=OpProfile(0.1, 0.01)),
           InstanceSpec("vec", "", "vector_db", kind="vector_db", op_profile=OpProfile(0.05, 0.01)))


class Fork(Workflow):
    """a (10 units) and b (30 units) on the embedder, then c (1 unit) reads both."""

    name = "fork"

    def start(self, g: Graph) -> None:
        a = g.tool("a", "embed", batchable=True, units=10)
        b = g.tool("b", "embed", batchable=True, units=30)
        g.tool("c", "vector_search", batchable=True, x=a, y=b)


def two_at_once() -> Workload:
    return Workload("fork", tuple(QuerySpec(i, 0.0, AppQuery("fork", Fork)) for i in range(2)))
