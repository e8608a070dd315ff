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
class LoraSpec:
    """The LoRA adapters an engine serves beside its base model (vLLM `--enable-lora
    --lora-modules NAME=PATH ... --max-loras N`): a request names an adapter as its model;
    at most `max_loras` adapters are in GPU slots at once (the adapters of one batch), and
    one not in a slot is loaded into a free slot or the least recently used one no running
    request needs, in `load_s` seconds during which the engine's iteration waits."""

    adapters: tuple[str, ...]
    max_loras: int = 1  # vLLM's default
    load_s: float = 0.05

    def __post_init__(self) -> None:
        if not self.adapters or self.max_loras < 1 or not self.load_s >= 0:
            raise ValueError(f"a LoRA spec needs adapters, max_loras ≥ 1 and load_s ≥ 0, got {self}")

    def adapter_of(self, model: str | None) -> str | None:
        """The adapter a request's `model` names (case-insensitive), None for anything else."""
        if model is None:
            return None
        low = model.lower()
        return next((a for a in self.adapters if a.lower() == low), None)


@dataclass(frozen=True, slots=True)
class EngineParams:
    """What a vLLM/SGLang-like engine is configured with (the simulator models it)."""

    max_num_seqs: int = 256
    token_budget: int = 2048  # per-iteration token budget (chunked prefill)
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    prefix_caching: bool = True
    lora: LoraSpec | None = None  # LoRA adapters served beside the base model


Role = Literal["prefill", "decode", "both"]
PDProtocol = Literal["vllm", "sglang"]


@dataclass(frozen=True, slots=True)
class Link:
    """The interconnect between two instances, as the KV transfer of a disaggregated call
    sees it: line rate in bytes/s, the share of it a transfer achieves, a fixed latency
    (`flowserve.profiles.links` gives each interconnect class its defaults)."""

    kind: str  # nvlink, infiniband, roce, ethernet (reports)
    bandwidth_bytes_s: float
    efficiency: float
    latency_s: float

    @property
    def effective_bytes_s(self) -> float:
        return self.bandwidth_bytes_s * self.efficiency


@dataclass(frozen=True, slots=True)
class KVTransfer:
    """How an instance takes part in prefill/decode disaggregation beyond its role: the
    engines' protocol (vLLM's `kv_transfer_params`, SGLang's bootstrap rooms), a prefill
    instance's SGLang bootstrap port, whether its engine sends the KV layer by layer while
    it prefills (overlap), and its links to other instances (`peer name → Link`, the
    cluster's `links:`; any other peer over `default_link`)."""

    protocol: PDProtocol = "vllm"
    bootstrap_port: int | None = None
    layerwise: bool = False
    links: tuple[tuple[str, Link], ...] = ()
    default_link: Link | None = None  # None: the cluster's default class (`flowserve.profiles.links`)


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
    # Prefill/decode disaggregation: `prefill` instances only prefill (for decode
    # instances, which receive the KV), `decode` ones decode and prefill short prompts
    # themselves, `both` (the default) do either (`flowserve.policies.scoring.scorers.pd`).
    role: Role = "both"
    kv_transfer: KVTransfer = field(default_factory=KVTransfer)
    # Other names clients may send as `model` for the base model (vLLM `--served-model-name`)
    aliases: tuple[str, ...] = ()

    @property
    def decodes(self) -> bool:
        """It may run a call to its end (a prefill-only instance only prefills for others)."""
        return self.role != "prefill"

    @property
    def prefills(self) -> bool:
        """It may prefill for a decode instance."""
        return self.role != "decode"

    def names(self) -> tuple[str, ...]:
        """Every `model` a request may name to reach this instance: the base model, its aliases
        and its LoRA adapters."""
        lora = self.engine.lora
        return (self.model, *self.aliases, *(lora.adapters if lora else ()))

    def served_names(self) -> frozenset[str]:
        """`names`, lower-case (requests name models case-insensitively)."""
        return frozenset(n.lower() for n in self.names())

    def serves(self, model: str | None) -> bool:
        """Whether a request naming `model` may go here (None: any instance)."""
        return model is None or model.lower() in self.served_names()
