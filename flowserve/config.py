"""Configuration files (YAML) and built-in names, validated with pydantic.

Errors come out as `ConfigError` naming the file, the field and the problem, so the CLI
can print one line and exit 2.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from flowserve import tenants
from flowserve.cluster import BUILTIN_CLUSTERS
from flowserve.errors import ConfigError
from flowserve.kvevents.config import KVEventsConfig
from flowserve.limits import (
    MAX_INSTANCES,
    WHY_INSTANCES,
    WHY_TP,
    BlockSize,
    Context,
    InstanceCount,
    ParamsB,
)
from flowserve.lora import adapters_apart, check_lora, lora_fields, lora_spec, served_names
from flowserve.pd_config import KVTransferConfig, LinkConfig, check_roles, transfer_spec, with_links
from flowserve.profiles.cost_model import kv_capacity_tokens
from flowserve.profiles.fitted import FittedCostModel, load_profile
from flowserve.profiles.hardware import get_gpu
from flowserve.profiles.links import DEFAULT_LINK_CLASS, LinkClass
from flowserve.profiles.models import ModelSpec, get_model
from flowserve.profiles.ops import op_profile
from flowserve.schema import Strict, at_most, looks_like_path, read_yaml, validate
from flowserve.types.specs import EngineParams, InstanceSpec, LoraSpec

# Llama-3.1-405B has 126 layers, hidden 16,384, 128 heads: 2^20 is beyond any model.
ArchInt = Annotated[int, Field(ge=1), at_most(1 << 20, "larger than any released model's")]


class ModelArch(Strict):
    """Architecture numbers of a model outside the catalog (what the roofline needs)."""

    params_b: ParamsB = Field(description="parameters, in billions")
    layers: ArchInt = Field(description="transformer blocks")
    hidden: ArchInt = Field(description="hidden (model) width")
    heads: ArchInt = Field(description="attention heads")
    kv_heads: ArchInt = Field(description="key/value heads (grouped-query attention); must divide `heads`")
    head_dim: ArchInt = Field(description="width of one attention head")
    max_context: Context = Field(description="longest sequence the model serves, in tokens")
    dtype_bytes: int = Field(2, ge=1, le=8, description="bytes per weight and KV element (2: fp16/bf16)")

    @model_validator(mode="after")
    def _grouped(self) -> ModelArch:
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads}): "
                             "grouped-query attention shares each KV head among whole groups")
        return self


def engine_url(url: str) -> str:
    """An engine's base URL: http or https, with a host and an explicit port, nothing
    after the path (ValueError naming what is wrong)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise ValueError(f"{url!r}: {e}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{url!r}: engines are reached over http or https (http://host:port), "
                         f"not {parts.scheme + '://' if parts.scheme else 'a url without a scheme'}")
    if not parts.hostname or not _HOST.fullmatch(parts.hostname):
        raise ValueError(f"{url!r}: no valid host name or address")
    if port is None:
        raise ValueError(f"{url!r}: write the port out (e.g. {parts.scheme}://{parts.hostname}:8000)")
    if port == 0:
        raise ValueError(f"{url!r}: port 0 is not a port an engine listens on")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{url!r}: credentials in the url are not supported")
    if parts.query or parts.fragment or not _PATH.fullmatch(parts.path):
        raise ValueError(f"{url!r}: a base url has no query, fragment or unusual characters in its path")
    return url


_HOST = re.compile(r"[A-Za-z0-9._-]{1,253}|[0-9A-Fa-f:.]{2,45}")  # a DNS name, IPv4, or an IPv6 literal
_PATH = re.compile(r"(/[A-Za-z0-9._~-]*)*")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class InstanceConfig(Strict):
    """One instance (or `count` identical ones). `model` is a catalog name, or any name with
    `model_arch` declared; `profile` (a fitted profile YAML) replaces the roofline cost
    model and supplies the model, context, KV capacity and default slots, so `gpu` and
    `model` may then be left out."""

    name: str = Field(min_length=1, description="instance name (1 to 64 letters, digits, `.`, `_`, `-`); with "
                      "`count` > 1 the instances are NAME-0, NAME-1, …")
    profile: str | None = Field(None, description="a fitted profile YAML (`flowserve profile`), relative to this file; "
                                "replaces the roofline cost model")
    model_arch: ModelArch | None = Field(None, description="architecture of a model outside the catalog")
    gpu: str | None = Field(None, description="GPU type: A100-80G, A6000, L40, L40S, L4, H100, H200")
    model: str | None = Field(None, description="a catalog model (llama-3.1-8b, llama-3.1-70b, mistral-7b, …) or "
                              "any name with `model_arch`; the name clients send as `model`")
    tp: Annotated[int, Field(ge=1), at_most(1024, "more GPUs than any NVLink domain")] = Field(
        1, description="tensor-parallel GPUs per instance")
    count: InstanceCount = Field(1, description="identical instances of this entry")
    max_inflight: int | None = Field(None, ge=1, description="most calls running on the instance at once (default: "
                                     "no cap beyond the engine's own admission, which simulated engines report)")
    backend: Literal["sim", "openai"] = Field("sim", description="`sim`: the simulated engine; `openai`: an "
                                              "OpenAI-compatible engine at `url` (serving only)")
    url: str | None = Field(None, description="base URL of an `openai` engine (no /v1), or of a non-LLM service")
    max_num_seqs: Annotated[int, Field(ge=1), at_most(1 << 16, "vLLM's default is 256")] = Field(
        256, description="sequences the engine batches at once (vLLM's max_num_seqs)")
    token_budget: Annotated[int, Field(ge=16), at_most(1 << 20, "vLLM's default is 2,048")] = Field(
        2048, description="tokens per engine iteration, chunked prefill included (vLLM's max_num_batched_tokens)")
    block_size: BlockSize = Field(16, description="tokens per KV-cache block")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="share of GPU memory the engine takes "
                                          "(weights + KV cache)")
    prefix_caching: bool = Field(True, description="the engine keeps computed prefixes (radix cache)")
    kind: Literal["llm", "embedding", "reranker", "vector_db", "search"] = Field(
        "llm", description="an LLM engine, or a non-LLM component of Teola's apps")
    op_profile: dict[str, Any] | None = Field(None, description="cost-profile fields of a non-LLM component "
                                              "(`flowserve.profiles.ops`)")
    kv_events: KVEventsConfig | None = Field(None, description="where the engine publishes its KV-cache events "
                                             "(vLLM, SGLang); its prefix view is then the engine's own cache")
    models: list[str] = Field(default_factory=list, description="other names clients may send as `model` for the "
                              "base model (vLLM `--served-model-name`)")
    lora_adapters: list[str] | None = Field(None, description="LoRA adapters the engine serves beside the base model "
                                            "(vLLM `--lora-modules NAME=PATH`, by NAME): a request names one as its "
                                            "`model` and goes only to instances serving it")
    max_loras: Annotated[int, Field(ge=1), at_most(1024, "more adapters than one batch holds")] | None = Field(
        None, description="adapters in GPU slots at once, the most one batch mixes (vLLM `--max-loras`; default 1); "
        "one not in a slot is loaded into the least recently used free one")
    lora_load_s: float | None = Field(None, ge=0, le=600, description="seconds the engine's iteration waits to load an "
                                      "adapter not in a slot (default 0.05, an assumption: measure yours)")
    role: Literal["prefill", "decode", "both"] = Field("both", description="prefill/decode disaggregation: `prefill` "
                                                       "only prefills for decode instances, `decode` decodes (and "
                                                       "prefills the prompts not worth moving), `both` does either. "
                                                       "Checked, not yet scheduled: a cluster with a `prefill` "
                                                       "instance is refused when it runs")
    kv_transfer: KVTransferConfig | None = Field(None, description="the engine's P/D protocol and KV transfer "
                                                 "(`vllm` by default)")
    _profile: FittedCostModel | None = PrivateAttr(None)

    @field_validator("models", "lora_adapters")
    @classmethod
    def _served_names(cls, v: list[str] | None) -> list[str] | None:
        return served_names(v)

    @field_validator("url")
    @classmethod
    def _engine_url(cls, v: str | None) -> str | None:
        return None if v is None else engine_url(v)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        # a name is a label, a URL path segment (/admin/instances/NAME) and a header value
        # (x-flowserve-instance): no '/', '..', spaces or control characters
        if not _NAME.fullmatch(v):
            raise ValueError(f"{v[:80]!r}: an instance name is 1 to 64 letters, digits, '.', '_' or '-', starting "
                             f"with a letter or digit")
        return v

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, v: str | None) -> str | None:
        try:
            return None if v is None else get_gpu(v).name
        except ConfigError as e:
            raise ValueError(str(e)) from None

    @field_validator("model")
    @classmethod
    def _known_model(cls, v: str | None, info: ValidationInfo) -> str | None:
        custom = ("profile", "model_arch")  # absent from info.data: given but invalid (reported anyway)
        if v is None or any(info.data.get(f) is not None or f not in info.data for f in custom):
            return v
        try:
            return get_model(v).name  # a catalog name, or the error listing them
        except ConfigError as e:
            raise ValueError(f"{e}. A model outside the catalogue runs with its measured costs: `flowserve "
                             f"profile --url ENGINE_URL --model {v} --out {v}.yaml`, then `profile: {v}.yaml` "
                             f"on the instance (or declare its architecture with `model_arch:`)") from None

    @model_validator(mode="after")
    def _complete(self) -> InstanceConfig:
        where = f"instance {self.name!r}"
        if self.kind != "llm":
            if self.models or self.lora_adapters is not None:
                raise ValueError(f"{where}: models and lora_adapters are for LLM instances, not kind {self.kind}")
            try:
                op_profile(self.kind, self.op_profile)
            except ConfigError as e:
                raise ValueError(f"{where}: {e}") from None
            if self.role != "both" or self.kv_transfer is not None:
                raise ValueError(f"{where}: role and kv_transfer are an LLM instance's (disaggregated serving)")
            return self
        if self.kv_transfer is not None and self.kv_transfer.bootstrap_port is not None and self.role == "decode":
            raise ValueError(f"{where}: bootstrap_port is a prefill instance's (SGLang's bootstrap server)")
        if self.op_profile is not None:
            raise ValueError(f"{where}: op_profile is for non-LLM kinds (embedding, reranker, vector_db, search)")
        check_lora(where, self.model, self.models, self.lora_adapters, {"max_loras": self.max_loras,
                                                                        "lora_load_s": self.lora_load_s})
        if self.url is not None and self.backend == "sim":
            raise ValueError(f"{where}: url is for backend openai (a simulated engine has none)")
        if self.kv_events is not None:
            if self.backend == "openai" and self.kv_events.endpoint is None:
                raise ValueError(f"{where}: kv_events needs the engine's `endpoint` (tcp://HOST:PORT)")
            if self.backend == "sim" and self.kv_events.endpoint is not None:
                raise ValueError(f"{where}: a simulated engine publishes its events itself: write `kv_events: {{}}`")
            if self.count > 1 and self.kv_events.endpoint is not None:
                raise ValueError(f"{where}: count {self.count} instances cannot share one kv_events endpoint")
        if self.profile is not None:
            try:
                self._profile = load_profile(self.profile)
            except ConfigError as e:
                raise ValueError(f"{where}: profile: {e}") from None
            if self.model is not None and self.model.lower() != self._profile.model.lower():
                raise ValueError(f"{where}: model {self.model!r} differs from the profile's model "
                                 f"{self._profile.model!r} ({self.profile})")
            return self
        for field in ("gpu", "model"):
            if getattr(self, field) is None:
                raise ValueError(f"{where}: {field} is required unless the instance has a profile")
        self._fits(where)
        return self

    def lora(self) -> LoraSpec | None:
        return lora_spec(self.lora_adapters, self.max_loras, self.lora_load_s)

    def _fits(self, where: str) -> None:
        """The model must shard over tp and leave KV room on the GPUs (vLLM refuses to
        start otherwise: "No available memory for the cache blocks")."""
        assert self.gpu is not None and self.model is not None
        arch = (ModelSpec(self.model, **self.model_arch.model_dump()) if self.model_arch is not None
                else get_model(self.model))
        if arch.heads % self.tp:
            raise ValueError(f"{where}: tp {self.tp} does not divide {arch.name}'s {arch.heads} attention "
                             f"heads ({WHY_TP})")
        gpu = get_gpu(self.gpu)
        kv = kv_capacity_tokens(gpu, arch, self.tp, self.gpu_memory_utilization)
        if kv < self.block_size:
            usable = self.tp * gpu.memory_gib * 2**30 * self.gpu_memory_utilization / 1e9
            raise ValueError(f"{where}: {arch.name} does not fit: {arch.weight_bytes / 1e9:,.1f} GB of weights "
                             f"vs {usable:,.1f} GB usable on {self.tp}×{gpu.name} (gpu_memory_utilization "
                             f"{self.gpu_memory_utilization}) leaves {kv} KV tokens, less than one block of "
                             f"{self.block_size}; raise tp or use a larger GPU")

    def specs(self) -> list[InstanceSpec]:
        if self.kind != "llm":
            names = self.names
            prof = op_profile(self.kind, self.op_profile)
            return [InstanceSpec(n, self.gpu or "", self.model or self.kind, self.tp, self.max_inflight,
                                 backend=self.backend, url=self.url, kind=self.kind, op_profile=prof)
                    for n in names]
        prof, given = self._profile, self.model_fields_set
        seqs = prof.slots if prof and "max_num_seqs" not in given else self.max_num_seqs
        budget = prof.token_budget if prof and "token_budget" not in given else self.token_budget
        inflight = prof.slots if prof and "max_inflight" not in given else self.max_inflight
        model = self.model or (prof.model if prof else "")
        gpu = self.gpu or (prof.device if prof else "")
        arch = None if self.model_arch is None else ModelSpec(model, **self.model_arch.model_dump())
        engine = EngineParams(seqs, budget, self.block_size, self.gpu_memory_utilization, self.prefix_caching,
                              self.lora())
        names = self.names
        kv = None if self.kv_events is None else self.kv_events.spec(self.block_size)
        return [InstanceSpec(n, gpu, model, self.tp, inflight, engine, self.backend, self.url,
                             reports_capacity=self.backend == "sim", model_spec=arch, profile=prof, kv_events=kv,
                             aliases=tuple(self.models), role=self.role,
                             kv_transfer=transfer_spec(self.kv_transfer))
                for n in names]

    @property
    def names(self) -> list[str]:
        """Its instances' names: NAME, or NAME-0, NAME-1, ... with `count` > 1."""
        return [self.name] if self.count == 1 else [f"{self.name}-{i}" for i in range(self.count)]


class ClusterConfig(Strict):
    """A cluster file (`--cluster FILE`), and the top level of a serving YAML (which may add
    `gateway:`, see `GatewaySettings`)."""

    instances: list[InstanceConfig] = Field(min_length=1, description="the engine instances")
    api_keys: list[Any] | dict[str, Any] = Field(
        default_factory=list, description="bearer keys the gateway accepts, each naming its tenant: a list (each key "
        "its own tenant, `key-1`, `key-2`, ...) or a mapping `KEY: TENANT` / `KEY: {tenant: T, acts_for: [...]}` "
        "(docs/operations.md, Security); empty: no authentication, any client names any tenant")

    links: list[LinkConfig] = Field(default_factory=list, description="interconnects between instances or groups "
                                    "(an entry's name: all its instances), for the KV transfers of disaggregated "
                                    "calls (checked, not yet scheduled)")
    default_link: LinkClass = Field(DEFAULT_LINK_CLASS, description="the interconnect class of pairs no link names")

    @field_validator("api_keys", mode="before")
    @classmethod
    def _keys(cls, v: Any) -> Any:
        tenants.api_keys(v)  # raises ValueError naming the fault
        return v

    @model_validator(mode="after")
    def _bounded(self) -> ClusterConfig:
        total = sum(i.count for i in self.instances)
        if total > MAX_INSTANCES:
            raise ValueError(f"{total:,} instances is above the limit of {MAX_INSTANCES:,} ({WHY_INSTANCES})")
        return self

    def specs(self) -> tuple[InstanceSpec, ...]:
        out = [s for inst in self.instances for s in inst.specs()]
        names = [s.name for s in out]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(f"cluster: duplicate instance names {dup}")
        adapters_apart(out)
        check_roles(out)
        out = with_links(out, {i.name: i.names for i in self.instances}, self.links, self.default_link)
        ends = [s.kv_events.endpoint for s in out if s.kv_events is not None and s.kv_events.endpoint]
        shared = sorted({e for e in ends if ends.count(e) > 1})
        if shared:
            raise ConfigError(f"cluster: instances share the kv_events endpoints {shared}: each engine publishes on "
                              "its own")
        return tuple(out)


def load_cluster(ref: str, overrides: Mapping[str, Any] | None = None) -> tuple[InstanceSpec, ...]:
    """A built-in cluster name or a cluster YAML file (a serving YAML too: its `gateway:`
    section is left out); `overrides` set engine fields."""
    if ref in BUILTIN_CLUSTERS and not looks_like_path(ref):  # a folder of that name shadows no built-in
        data = {"instances": [
            {"name": s.name, "gpu": s.gpu, "model": s.model, "tp": s.tp, **lora_fields(s.engine.lora)}
            if s.kind == "llm"
            else {"name": s.name, "kind": s.kind, **({} if s.op_profile is None else
                                                      {"op_profile": dataclasses.asdict(s.op_profile)})}
            for s in BUILTIN_CLUSTERS[ref]
        ]}
        source = f"cluster {ref!r}"
    elif Path(ref).exists():
        # a serving YAML is a cluster file too: its `gateway:` section is the gateway's alone
        data = {k: v for k, v in read_yaml(ref).items() if k != "gateway"}
        data, source = _profiles_relative_to(data, Path(ref).parent), ref
    else:
        raise ConfigError(f"cluster {ref!r} is neither a file nor a built-in cluster "
                          f"({', '.join(BUILTIN_CLUSTERS)})")
    if overrides and isinstance(data.get("instances"), list):
        data = {**data, "instances": [{**i, **overrides} if isinstance(i, dict) else i
                                      for i in data["instances"]]}
    return validate(ClusterConfig, data, source).specs()


def _profiles_relative_to(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """`profile:` paths in a cluster file are relative to that file."""
    instances = data.get("instances")
    if not isinstance(instances, list):
        return data
    fixed = [{**i, "profile": str(base / i["profile"])}
             if isinstance(i, dict) and isinstance(i.get("profile"), str) and not Path(i["profile"]).is_absolute()
             else i for i in instances]
    return {**data, "instances": fixed}


def parse_sets(items: list[str] | None) -> dict[str, dict[str, Any]]:
    """--set section.name=value → {section: {name: value}} (value parsed as YAML)."""
    out: dict[str, dict[str, Any]] = {}
    sections = ("workload", "dispatch", "queue", "engine")
    for item in items or []:
        key, sep, value = item.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot or not name:
            raise ConfigError(f"--set {item!r}: expected section.name=value")
        if section not in sections:
            raise ConfigError(f"--set {item!r}: section must be one of {', '.join(sections)}")
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            parsed = value
        out.setdefault(section, {})[name] = parsed
    return out

