"""The read-only view policies get of the cluster, and the one cost estimate they share.

`t_comp` is the predicted compute time of a call on an instance (Hexgen Eq. 2), aware
of the prompt prefix the router's index believes the instance caches: every policy and
the core's outstanding-work account (Hexgen's t_queue, Eq. 3) use this function.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Protocol

from flowserve.cache.prefix_index import PrefixIndex, PrefixReader
from flowserve.core.readers import IndexReader, InstanceView, PredictorReader, QueryView, QueryViews
from flowserve.core.state import CallState, InstanceState, QueryState
from flowserve.core.tenants import TenantShares
from flowserve.profiles.cost_model import CostModel
from flowserve.profiles.predictor import OutputPredictor
from flowserve.types.work import Tokens


def predicted_call_time(cost: CostModel, input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float:
    """Eq. 2 with a cached prefix: prefill of the uncached prompt + decode of the predicted
    output (at least one prompt token is always computed, as engines do)."""
    return cost.call_time(input_tokens, output_tokens, min(cached_tokens, max(input_tokens - 1, 0)))


Instance = InstanceState | InstanceView  # what the view's estimates take: a candidate, or one it handed out

COST_MEMO = 1 << 16  # shared t_comp entries kept (cleared when full: a bounded memo)
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


class KVReader(Protocol):
    """What the view asks of the engines' cache events (`flowserve.core._kv.KVBook`)."""

    def split(self, instance: str, prompt: Tokens, max_age_s: float, now: float) -> tuple[int, int] | None:
        """(confirmed, speculative) prompt tokens from the start: blocks the instance's engine
        holds, then blocks routed there at most `max_age_s` ago; None where its view is not
        precise (the router's estimate is all there is)."""
        ...


class ClusterView:
    """What policies may read: instances, predicted costs, prefix index, queries, tenants.

    Read-only: every field is a property without a setter, and what it hands out is a
    read-only face of the core's state (`flowserve.core.readers`: instances and queries as
    proxies, the predictor and the prefix index as readers, the tenant accounts as
    `TenantShares`). Only the core advances it (`advance`: `now`; `next_decision`:
    `epoch`, which invalidates per-call memos of index matches; `instance_added`).
    """

    __slots__ = ("_costs", "_epoch", "_hits", "_index_reader", "_instances", "_kv", "_now", "_predictor",
                 "_predictor_reader", "_prefix_index", "_queries", "_tenants", "_views")

    def __init__(self, instances: Mapping[str, InstanceState], predictor: OutputPredictor,
                 queries: Mapping[int, QueryState], prefix_index: PrefixIndex | None, tenants: TenantShares,
                 kv: KVReader | None = None) -> None:
        self._views: dict[str, InstanceView] = {name: InstanceView(i) for name, i in instances.items()}
        self._instances = MappingProxyType(self._views)
        self._queries = QueryViews(queries)
        self._predictor = predictor
        self._predictor_reader = PredictorReader(predictor)
        self._prefix_index = prefix_index
        self._index_reader = None if prefix_index is None else IndexReader(prefix_index)
        self._tenants = tenants
        self._kv = kv
        self._now = 0.0
        self._epoch = 0
        self._hits: tuple[int, int, dict[str, int]] | None = None  # (epoch, call id, per instance)
        # t_comp by (hardware profile, prompt, output, cached tokens): calls of one stage share it
        self._costs: dict[tuple, float] = {}

    @property
    def instances(self) -> Mapping[str, InstanceView]:
        return self._instances

    @property
    def queries(self) -> Mapping[int, QueryView]:
        return self._queries

    @property
    def predictor(self) -> PredictorReader:
        return self._predictor_reader

    @property
    def prefix_index(self) -> PrefixReader | None:
        return self._index_reader

    @property
    def tenants(self) -> TenantShares:
        return self._tenants

    @property
    def now(self) -> float:
        return self._now

    @property
    def epoch(self) -> int:
        return self._epoch

    def advance(self, now: float) -> None:
        """The core's clock moved to the time of the event it handles (only the core and
        the policy harness call this)."""
        self._now = now

    def next_decision(self) -> None:
        """A new dispatch decision: index matches memoised for the previous one are stale."""
        self._epoch += 1

    def instance_added(self, inst: InstanceState) -> None:
        """A new instance (or a replacement under its name) is in the core's books."""
        self._views[inst.name] = InstanceView(inst)

    def cached_tokens(self, cs: CallState, inst: Instance) -> int:
        """Prompt tokens the router's index believes `inst` caches (0 without an index)."""
        if self._prefix_index is None or cs.call is None:
            return 0
        memo = self._hits
        if memo is None or memo[0] != self._epoch or memo[1] != cs.id:
            memo = self._hits = (self._epoch, cs.id, self._prefix_index.match_by_instance(cs.call.prompt)[1])
        return min(memo[2].get(inst.name, 0), cs.input_tokens - 1)

    def cache_split(self, cs: CallState, inst: Instance, max_age_s: float = math.inf) -> tuple[int, int]:
        """`cached_tokens` as (confirmed, speculative): on an instance whose engine publishes its
        cache events (a precise view), the blocks it confirmed, then those the router only
        believes are there because it routed prompts there, at most `max_age_s` ago (older
        speculation is left out). Where the view is not precise, the router's estimate is all
        there is: all of it counts as confirmed."""
        believed = self.cached_tokens(cs, inst)
        if self._kv is None or cs.call is None or not believed:
            return believed, 0
        split = self._kv.split(inst.name, cs.call.prompt, max_age_s, self._now)
        if split is None:
            return believed, 0
        confirmed = min(split[0], believed)
        return confirmed, min(split[1], believed - confirmed)

    def confirmed_tokens(self, cs: CallState, inst: Instance) -> int:
        """Of `cached_tokens`, those the instance's engine confirmed (`cache_split`)."""
        return self.cache_split(cs, inst)[0]

    def t_comp(self, cs: CallState, inst: Instance) -> float:
        """Predicted compute seconds of the call on the instance (see the module docstring)."""
        return self._cost(cs, inst, self.cached_tokens(cs, inst))

    def t_cold(self, cs: CallState, inst: Instance) -> float:
        """The same with nothing cached."""
        return self._cost(cs, inst, 0)

    def _cost(self, cs: CallState, inst: Instance, cached: int) -> float:
        key = (inst.profile, cached)
        cost = cs.costs.get(key)
        if cost is None:
            shared = (inst.profile, cs.input_tokens, cs.predicted_output, cached)
            cost = self._costs.get(shared)
            if cost is None:
                if len(self._costs) >= COST_MEMO:
                    self._costs.clear()
                cost = self._costs[shared] = predicted_call_time(inst.cost, cs.input_tokens, cs.predicted_output,
                                                                 cached)
            cs.costs[key] = cost
        return cost

    def queueing_delay_s(self, inst: Instance) -> float:
        """A new call's predicted wait on `inst` (`queueing_delay_s` at its current batch)."""
        slots = min(inst.spec.engine.max_num_seqs, inst.spec.max_inflight or inst.spec.engine.max_num_seqs)
        batch = min(len(inst.running) + len(inst.queue) + 1, slots)
        return queueing_delay_s(inst.outstanding, batch_speedup(inst.cost, batch))

    def up_instances(self, model: str | None = None) -> list[InstanceView]:
        return [i for i in self._views.values() if i.up and i.serves(model)]
