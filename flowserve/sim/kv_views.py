"""How the router learns what a simulated engine caches: three views of one engine model.

* `engine` (the default): the engine reports each eviction (`PrefixEvicted`) — an ideal
  no real engine offers without events;
* `precise` (`PublishingEngine`): the engine publishes KV-cache events as vLLM does, read
  back through the gateway's decoder (`flowserve.kvevents.engine_blocks`);
* `estimated` (`EstimatingEngine`): the engine reports nothing and the driver keeps the
  gateway's estimate of its cache (`CacheEstimate`, pinned while calls run, LRU within the
  KV capacity), as it does for engines without events;
* `configured`: each instance as a live gateway sees it — precise where its config has
  `kv_events:`, estimated elsewhere (`flowserve simulate`'s default).

Without a view (`flowserve.sim.run.simulate`'s default) an instance publishes when its
config has `kv_events:` and reports its evictions otherwise; `cache_view=` puts every
instance in one view (`flowserve simulate --cache-view`, `bench kv-events` compare them).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from flowserve.cache.radix import RadixNode
from flowserve.engines.cache_estimate import CacheEstimate, estimated_sequences
from flowserve.profiles.cost_model import CostModel
from flowserve.profiles.slot_config import SlotConfig
from flowserve.sim.engine import SimEngine
from flowserve.sim.sequence import Seq
from flowserve.sim.slots import SlotEngine, make_engine
from flowserve.types.events import CallFailed, CallFinished
from flowserve.types.kv import KVEventsSpec
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall

CacheView = Literal["engine", "precise", "estimated", "configured"]


class PublishingEngine(SimEngine):
    """Publishes its cache's blocks; `announce` gives the first batch, before any call."""

    def __init__(self, spec: InstanceSpec, cost: CostModel, kv_capacity: int, report_prefill: bool = False) -> None:
        # the wire format needs msgpack, which the core's dependencies leave out: imported when publishing
        from flowserve.kvevents.engine_blocks import EngineBlocks

        assert spec.kv_events is not None
        super().__init__(spec.name, spec.engine, cost, kv_capacity, report_evictions=True,
                         report_prefill=report_prefill)
        self.blocks = EngineBlocks(spec.name, spec.kv_events.block_size)

    def _finish_prefill(self, s: Seq, now: float) -> None:
        super()._finish_prefill(s, now)
        if self.tree is not None:
            self.blocks.stored(s.call.prompt)

    def _on_evict(self, node: RadixNode) -> None:
        assert self.tree is not None
        self.blocks.evicted(self.tree.path_tokens(node), node.depth - len(node.key))

    def _drain(self) -> list:
        return super()._drain() + self.blocks.flush(self._now)

    def announce(self, now: float) -> list:
        return self.blocks.announce(now)


class _Estimated:
    """The driver's estimate of an engine's cache beside the engine model: the engine reports
    nothing; the estimate reports estimated evictions, as the gateway's does."""

    estimate: CacheEstimate

    def submit(self, call: LLMCall, now: float, output_tokens: int | None = None,
               marks: tuple[int, ...] = ()) -> list:
        evicted = self.estimate.on_send(call.id, call.prompt, now)  # as the gateway's driver, at SendCall
        return evicted + self._ended(super().submit(call, now, output_tokens, marks))  # type: ignore[misc]

    def advance(self, now: float) -> list:
        return self._ended(super().advance(now))  # type: ignore[misc]

    def abort(self, call_id: int, now: float) -> None:
        super().abort(call_id, now)  # type: ignore[misc]
        self.estimate.on_end(call_id)

    def _ended(self, events: list) -> list:
        for ev in events:
            if isinstance(ev, CallFinished | CallFailed):
                self.estimate.on_end(ev.call_id)
        return events


class EstimatingEngine(_Estimated, SimEngine):
    """A vLLM/SGLang-like engine that reports nothing; the driver's estimate of its cache
    believes it holds `believed` tokens (the gateway's `cache_tokens`, by default the
    catalog's KV capacity), which a real engine's may not (vLLM keeps memory for
    activations and CUDA graphs out of its cache)."""

    def __init__(self, spec: InstanceSpec, cost: CostModel, kv_capacity: int, believed: int | None = None,
                 report_prefill: bool = False) -> None:
        super().__init__(spec.name, spec.engine, cost, kv_capacity, report_evictions=False,
                         report_prefill=report_prefill)
        self.estimate = CacheEstimate(spec.name, max(believed or kv_capacity, 1))


class EstimatingSlotEngine(_Estimated, SlotEngine):
    """A llama-server (its slot caches, `flowserve.sim.slots`) under the gateway's estimate,
    which keeps at most one cached prompt per slot (`estimated_sequences`), LRU: what the
    router believes of a llama-server, while the slots themselves keep what llama-server's
    own slot choice leaves them."""

    def __init__(self, spec: InstanceSpec, cost: CostModel, kv_capacity: int, config: SlotConfig,
                 believed: int | None = None, report_prefill: bool = False) -> None:
        super().__init__(spec.name, spec.engine, cost, kv_capacity, config, report_evictions=False,
                         report_prefill=report_prefill)
        self.estimate = CacheEstimate(spec.name, max(believed or kv_capacity, 1), estimated_sequences(spec))


def viewed_spec(spec: InstanceSpec, view: CacheView | None) -> InstanceSpec:
    """The instance as the core should know it under `view` (None: as configured)."""
    if view == "precise" and spec.kind == "llm" and spec.kv_events is None:
        return replace(spec, kv_events=KVEventsSpec("", block_size=spec.engine.block_size))
    if view in ("estimated", "engine") and spec.kv_events is not None:
        return replace(spec, kv_events=None)
    return spec


def viewed_engine(spec: InstanceSpec, cost: CostModel, kv_capacity: int, report_evictions: bool,
                  view: CacheView | None = None, believed: int | None = None,
                  report_prefill: bool = False) -> SimEngine:
    """The engine model of an instance (`viewed_spec` first), reporting to the router as `view`
    says; `believed`: the KV tokens an estimate takes the engine to cache (default: its own);
    report_prefill: a PrefillDone per completed prefill (the core shares prefills)."""
    if spec.kv_events is not None and spec.engine.prefix_caching:
        return PublishingEngine(spec, cost, kv_capacity, report_prefill)
    if view in ("estimated", "configured") and report_evictions and spec.engine.prefix_caching:
        if cost.slot_config is not None:
            return EstimatingSlotEngine(spec, cost, kv_capacity, cost.slot_config, believed, report_prefill)
        return EstimatingEngine(spec, cost, kv_capacity, believed, report_prefill)
    return make_engine(spec.name, spec.engine, cost, kv_capacity, report_evictions, report_prefill)
