"""Instance specs: what an engine instance is (hardware, model, engine settings, backend)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from flowserve.types.kv import KVEventsSpec

if TYPE_CHECKING:
    from flowserve.profiles.fitted import FittedCostModel
    from flowserve.profiles.models import ModelSpec
    from flowserve.profiles.ops import OpProfile


@dataclass(frozen=True, slots=True)
class EngineParams:
    """What a vLLM/SGLang-like engine is configured with (the simulator models it)."""

    max_num_seqs: int = 256
    token_budget: int = 2048  # per-iteration token budget (chunked prefill)
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    prefix_caching: bool = True


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    name: str
    gpu: str
    model: str
    tp: int = 1
    max_inflight: int | None = None
    engine: EngineParams = field(default_factory=EngineParams)
    backend: Literal["sim", "openai"] = "sim"
    url: str | None = None
    # The driver reports the engine's admission state (InstanceCapacity) after each change;
    # otherwise the core releases up to `max_inflight` calls.
    reports_capacity: bool = False
    # A model outside the catalog: its declared architecture (for the roofline) and/or a
    # fitted profile (`flowserve profile`), which then replaces the roofline.
    model_spec: ModelSpec | None = None
    profile: FittedCostModel | None = None
    # "llm", or a non-LLM engine (embedding, reranker, vector_db, search) that runs the
    # batchable ops of its kind with this cost profile (`flowserve.graph.primitives`)
    kind: str = "llm"
    op_profile: OpProfile | None = None
    # Where the engine publishes its KV-cache events (vLLM/SGLang `--kv-events-config`);
    # None: it publishes none and its view is the router's estimate.
    kv_events: KVEventsSpec | None = None
