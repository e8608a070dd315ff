"""State the core keeps per call, query and instance, and the read-only view policies get.

Policies read this state through `ClusterView`; only the core mutates it. Predicted
costs use the instance's cost model and the output predictor, never the simulator's
ground truth.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.graph.nodes import CallEstimate
from flowserve.graph.runtime import QueryRun
from flowserve.profiles.cost_model import CostModel
from flowserve.profiles.predictor import OutputPredictor
from flowserve.types import InstanceSpec, LLMCall, Query

if TYPE_CHECKING:
    from flowserve.policies.base import QueuePolicy

HISTORY_LEN = 512


class CallState:
    """One LLM call while the core tracks it (queued or running)."""

    __slots__ = ("attempts", "call", "costs", "enqueued", "excluded", "instance", "query",
                 "queued", "ready", "released", "t_comp")

    def __init__(self, call: LLMCall, query: QueryState, ready: float) -> None:
        self.call = call
        self.query = query
        self.ready = ready  # when its node became ready
        self.instance: str | None = None
        self.enqueued = ready  # when it entered its instance's queue
        self.released: float | None = None  # when it was sent to the engine
        self.queued = False  # waiting in its instance's queue
        self.t_comp = 0.0  # predicted compute seconds on its instance
        self.costs: dict[tuple, float] = {}  # per hardware profile (InstanceState.profile)
        self.attempts = 0
        self.excluded: set[str] = set()  # instances that failed this call

    @property
    def id(self) -> int:
        return self.call.id


class QueryState:
    """One query while it runs."""

    __slots__ = ("calls_done", "failed", "inflight", "progressed", "query", "run")

    def __init__(self, query: Query) -> None:
        self.query = query
        self.run = QueryRun(query.program)
        self.inflight: dict[int, CallState] = {}
        self.calls_done = 0
        self.failed = False
        # When the workflow last progressed (a node finished; arrival before that):
        # deadline budgets of the remaining calls are re-split from here (Hexgen Eq. 5).
        self.progressed = query.arrival

    @property
    def id(self) -> int:
        return self.query.id

    def expected_remaining(self) -> Sequence[CallEstimate]:
        return self.query.program.expected_remaining()


@dataclass(frozen=True, slots=True)
class FinishedCall:
    """A finished call, as kept in an instance's recent history."""

    call_id: int
    workflow: str
    stage: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    enqueued: float
    released: float
    finished: float
    first_token: float | None
    predicted_s: float


class InstanceState:
    """One engine instance as the core sees it."""

    def __init__(self, spec: InstanceSpec, cost: CostModel, queue: QueuePolicy,
                 engine_reports_capacity: bool) -> None:
        self.spec = spec
        self.name = spec.name
        self.cost = cost
        self.profile = (spec.gpu.lower(), spec.model.lower(), spec.tp, spec.model_spec, spec.profile)
        self.queue = queue
        self.running: dict[int, CallState] = {}
        self.outstanding = 0.0  # Σ predicted t_comp of queued + running calls
        self.up = True
        self.engine_reports_capacity = engine_reports_capacity
        # Engine-reported admission state (simulated engines); optimistic between reports.
        big = 1 << 62
        self.free_seqs = big
        self.headroom = big
        self.kv_free = big
        self.kv_capacity: int | None = None  # KV cache tokens (from the instance's profile)
        self.history: deque[FinishedCall] = deque(maxlen=HISTORY_LEN)
        self.dispatched = 0
        self.completed = 0

    @property
    def slots_free(self) -> int:
        """Calls this instance can start now: engine admission and max_inflight."""
        free = self.free_seqs
        if self.spec.max_inflight is not None:
            free = min(free, self.spec.max_inflight - len(self.running))
        return free

    def __repr__(self) -> str:
        return (f"InstanceState({self.name}, queued={len(self.queue)}, "
                f"running={len(self.running)}, outstanding={self.outstanding:.2f}s)")


class ClusterView:
    """What policies may read: instances, predicted costs, prefix index, queries."""

    def __init__(self, instances: Mapping[str, InstanceState], predictor: OutputPredictor,
                 queries: Mapping[int, QueryState], prefix_index: PrefixIndex | None) -> None:
        self.instances = instances
        self.predictor = predictor
        self.queries = queries
        self.prefix_index = prefix_index
        self.now = 0.0

    def t_comp(self, cs: CallState, inst: InstanceState) -> float:
        """Eq. 2: predicted prefill of the prompt plus decode of the predicted output."""
        cost = cs.costs.get(inst.profile)
        if cost is None:
            c = cs.call
            cost = inst.cost.call_time(c.input_tokens, c.predicted_output)
            cs.costs[inst.profile] = cost
        return cost

    def up_instances(self, model: str | None = None) -> list[InstanceState]:
        return [
            i for i in self.instances.values()
            if i.up and (model is None or i.spec.model.lower() == model.lower())
        ]
