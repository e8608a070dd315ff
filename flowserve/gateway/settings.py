"""The serving configuration: the cluster YAML plus an optional `gateway:` section.

```yaml
instances:
  - {name: a, gpu: A100-80G, model: llama-3.1-8b, backend: sim, count: 2}
  - {name: llama, gpu: A100-80G, model: llama-3.1-8b, backend: openai, url: "http://127.0.0.1:8081"}
api_keys: [sk-local-1]          # empty: no authentication
gateway:                         # every field optional (safe defaults below)
  dispatch: prefix_affinity
  max_queue_s: 30               # 429 when the best instance already has more predicted work
```
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from flowserve.apps.user import user_workflow
from flowserve.config import ClusterConfig, _profiles_relative_to
from flowserve.errors import ConfigError
from flowserve.graph.passes import make_passes
from flowserve.policies import make_dispatch, queue_factory
from flowserve.retrieval.config import RetrievalSettings
from flowserve.schema import Strict, read_yaml, validate
from flowserve.types.specs import InstanceSpec


class ProgramSettings(Strict):
    """Programs: OpenAI calls that carry `x-flowserve-program` (docs/serving.md, Programs)."""

    idle_s: float = Field(60.0, gt=0)  # a program with no call for this long ends (its summary is kept)
    max_calls: int = Field(10_000, ge=1)  # calls per program
    max_duration_s: float = Field(3600.0, gt=0)  # from its first call; later calls are refused
    max_open_per_tenant: int = Field(1000, ge=1)
    kept: int = Field(10_000, ge=0)  # ended programs remembered (GET, and a clear error for late calls)


class GatewaySettings(Strict):
    dispatch: str = "round_robin"
    queue: str = "fcfs"
    dispatch_params: dict[str, Any] = Field(default_factory=dict)
    queue_params: dict[str, Any] = Field(default_factory=dict)
    passes: str = "none"  # graph passes on every workflow batch ("none", "all" or a list)
    # simulated engines: simulated seconds per real second (10: ten times faster than the GPU)
    time_scale: float = Field(1.0, gt=0)
    # failures
    request_timeout_s: float = Field(300.0, gt=0)  # one engine request, first byte to last
    connect_timeout_s: float = Field(5.0, gt=0)
    retries: int = Field(2, ge=0)  # same-instance retries of a retryable error
    retry_backoff_s: float = Field(0.05, ge=0)
    retry_backoff_cap_s: float = Field(1.0, ge=0)
    redispatch_limit: int = Field(3, ge=0)  # the core's re-dispatches to other instances
    breaker_failures: int = Field(3, ge=1)
    breaker_cooldown_s: float = Field(1.0, gt=0)
    breaker_max_cooldown_s: float = Field(30.0, gt=0)
    # admission control
    max_queue_s: float | None = Field(None, ge=0)
    max_queries: int = Field(10_000, ge=1)
    drain_timeout_s: float = Field(30.0, ge=0)
    sql_time_limit_s: float = Field(5.0, gt=0, le=3600)  # one statement of the `sql` tool (the SQL sandbox)
    # work
    jobs: Literal["thread", "process"] = "process"
    default_max_tokens: int = Field(256, ge=1)
    cache_tokens: dict[str, int] = Field(default_factory=dict)  # per instance: eviction estimate size
    cache_sequences: dict[str, int] = Field(default_factory=dict)  # per instance: slot caches (default: profile slots)
    engine_kinds: dict[str, Literal["llamacpp", "vllm", "sglang", "openai"]] = Field(default_factory=dict)
    tokenizers: dict[str, str] = Field(default_factory=dict)  # model → tokenizer.json (else engine /tokenize)
    workflows: dict[str, dict[str, Any]] = Field(default_factory=dict)
    programs: ProgramSettings = Field(default_factory=ProgramSettings)
    record: str | None = None  # folder: one JSON line per finished program and workflow query (agent-trace format)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)  # the retrieval ops' components
    admin_keys: list[str] | None = None  # None: the api_keys

    @model_validator(mode="after")
    def _policies_exist(self) -> GatewaySettings:
        make_dispatch(self.dispatch, self.dispatch_params)
        queue_factory(self.queue, self.queue_params)
        make_passes(self.passes)
        return self


@dataclass(frozen=True)
class ServeConfig:
    instances: tuple[InstanceSpec, ...]
    api_keys: tuple[str, ...] = ()
    gateway: GatewaySettings = field(default_factory=GatewaySettings)

    @property
    def admin_keys(self) -> tuple[str, ...]:
        keys = self.gateway.admin_keys
        return self.api_keys if keys is None else tuple(keys)

    def with_policies(self, dispatch: str | None, queue: str | None) -> ServeConfig:
        """The same config with other policies (names or import paths; their parameters
        are dropped when the policy changes)."""
        update: dict[str, Any] = {}
        if dispatch is not None and dispatch != self.gateway.dispatch:
            update.update(dispatch=dispatch, dispatch_params={})
        if queue is not None and queue != self.gateway.queue:
            update.update(queue=queue, queue_params={})
        gateway = validate(GatewaySettings, {**self.gateway.model_dump(), **update}, "gateway")
        return replace(self, gateway=gateway)


def serve_config(data: dict[str, Any], source: str) -> ServeConfig:
    data = dict(data)
    gw = data.pop("gateway", None) or {}
    if not isinstance(gw, dict):
        raise ConfigError(f"{source}: gateway: expected a mapping")
    cluster = validate(ClusterConfig, data, source)
    gateway = validate(GatewaySettings, gw, f"{source}: gateway")
    specs = cluster.specs()
    for s in specs:
        if s.backend == "openai" and not s.url:
            raise ConfigError(f"{source}: instance {s.name!r}: backend openai needs a `url:`")
    for section in ("cache_tokens", "cache_sequences", "engine_kinds"):
        unknown = sorted(set(getattr(gateway, section)) - {s.name for s in specs})
        if unknown:
            raise ConfigError(f"{source}: gateway.{section} names unknown instances {unknown}")
    for name, wf in gateway.workflows.items():
        if "app" in wf:  # a user's Workflow class: import it and check its arguments now
            user_workflow(name, wf)
    for model, path in gateway.tokenizers.items():
        if not Path(path).is_file():
            raise ConfigError(f"{source}: gateway.tokenizers: {model}: no file {path!r}")
    return ServeConfig(specs, tuple(cluster.api_keys), gateway)


def load_serve_config(path: str | Path) -> ServeConfig:
    """A serving YAML; `profile:` paths are relative to it, as in cluster files."""
    return serve_config(_profiles_relative_to(read_yaml(path), Path(path).parent), str(path))
