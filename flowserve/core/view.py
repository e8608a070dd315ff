"""The read-only view policies get of the cluster, and the one cost estimate they share.

`t_comp` is the predicted compute time of a call on an instance (Hexgen Eq. 2), aware
of the prompt prefix the router's index believes the instance caches: every policy and
the core's outstanding-work account (Hexgen's t_queue, Eq. 3) use this function.
"""

from __future__ import annotations

from collections.abc import Mapping

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.state import CallState, InstanceState, QueryState
from flowserve.core.tenants import TenantLedger
from flowserve.profiles.cost_model import CostModel
from flowserve.profiles.predictor import OutputPredictor


def predicted_call_time(cost: CostModel, input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float:
    """Eq. 2 with a cached prefix: prefill of the uncached prompt + decode of the predicted
    output (at least one prompt token is always computed, as engines do)."""
    return cost.call_time(input_tokens, output_tokens, min(cached_tokens, max(input_tokens - 1, 0)))


TYPICAL_CONTEXT = 1024  # tokens per sequence when estimating a batch's decode step


def batch_speedup(cost: CostModel, batch: int, context: float = TYPICAL_CONTEXT) -> float:
    """How many serial seconds of work a batch of `batch` sequences completes per second:
    b·step(1, c) / step(b, b·c) (Orca/vLLM iteration-level batching; ≥ 1)."""
    if batch <= 1:
        return 1.0
    return max(1.0, batch * cost.decode_step_time(1, context) / cost.decode_step_time(batch, batch * context))


def queueing_delay_s(outstanding_s: float, speedup: float) -> float:
    """The delay a new call adds to its own service on an instance that batches: the
    outstanding serial work drained at the batch's speedup (Hexgen's t_queue, Eq. 3,
    divided by the batched throughput instead of summed as if calls ran one by one).
    A call joining a big batch waits no queue but runs slower; this counts both."""
    return max(outstanding_s, 0.0) / max(speedup, 1.0)


class ClusterView:
    """What policies may read: instances, predicted costs, prefix index, queries."""

    def __init__(self, instances: Mapping[str, InstanceState], predictor: OutputPredictor,
                 queries: Mapping[int, QueryState], prefix_index: PrefixIndex | None) -> None:
        self.instances = instances
        self.predictor = predictor
        self.queries = queries
        self.prefix_index = prefix_index
        self.tenants = TenantLedger()  # tokens served per tenant (VTC counters; weights set by a queue policy)
        self.now = 0.0
        self.epoch = 0  # bumps at every dispatch decision: per-call memos of index matches
        self._hits: tuple[int, int, dict[str, int]] | None = None  # (epoch, call id, per instance)

    def cached_tokens(self, cs: CallState, inst: InstanceState) -> int:
        """Prompt tokens the router's index believes `inst` caches (0 without an index)."""
        if self.prefix_index is None or cs.call is None:
            return 0
        memo = self._hits
        if memo is None or memo[0] != self.epoch or memo[1] != cs.id:
            memo = self._hits = (self.epoch, cs.id, self.prefix_index.match_by_instance(cs.call.prompt)[1])
        return min(memo[2].get(inst.name, 0), cs.input_tokens - 1)

    def t_comp(self, cs: CallState, inst: InstanceState) -> float:
        """Predicted compute seconds of the call on the instance (see the module docstring)."""
        cached = self.cached_tokens(cs, inst)
        key = (inst.profile, cached)
        cost = cs.costs.get(key)
        if cost is None:
            cost = cs.costs[key] = predicted_call_time(inst.cost, cs.input_tokens, cs.predicted_output, cached)
        return cost

    def queueing_delay_s(self, inst: InstanceState) -> float:
        """A new call's predicted wait on `inst` (`queueing_delay_s` at its current batch)."""
        slots = min(inst.spec.engine.max_num_seqs, inst.spec.max_inflight or inst.spec.engine.max_num_seqs)
        batch = min(len(inst.running) + len(inst.queue) + 1, slots)
        return queueing_delay_s(inst.outstanding, batch_speedup(inst.cost, batch))

    def up_instances(self, model: str | None = None) -> list[InstanceState]:
        return [i for i in self.instances.values() if i.up and i.serves(model)]
