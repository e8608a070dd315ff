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

from pydantic import Field, field_validator, model_validator

from flowserve.apps.user import user_workflow
from flowserve.config import ClusterConfig, _profiles_relative_to
from flowserve.errors import ConfigError
from flowserve.graph.passes import make_passes
from flowserve.policies import make_dispatch, queue_factory
from flowserve.policies.scoring import looks_like_path
from flowserve.retrieval.config import RetrievalSettings
from flowserve.schema import Strict, read_yaml, validate
from flowserve.tenants import ApiKeys, api_keys
from flowserve.tokenize.template import ChatTemplate, TemplateError
from flowserve.types.specs import InstanceSpec


class ProgramSettings(Strict):
    """Programs: OpenAI calls that carry `x-flowserve-program` (docs/serving.md, Programs)."""

    idle_s: float = Field(60.0, gt=0, description="a program with no call for this long ends (its summary is kept)")
    max_calls: int = Field(10_000, ge=1, description="calls per program; beyond, 429")
    max_duration_s: float = Field(3600.0, gt=0, description="seconds from a program's first call after which it "
                                  "ends; a later call gets 409")
    max_open_per_tenant: int = Field(1000, ge=1, description="open programs per tenant; beyond, 429")
    kept: int = Field(10_000, ge=0, description="ended programs remembered (GET /v1/programs/ID, and a clear 409 "
                      "for a late call)")


class StateSettings(Strict):
    """Replicas sharing one scheduler's view through Redis (docs/replicas.md)."""

    url: str = Field(description="the Redis that holds the shared state: redis://HOST:PORT/DB, rediss://..., or "
                     "unix:///PATH?db=N")
    namespace: str = Field("flowserve", pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="prefix of every key: "
                           "deployments with another namespace share nothing")
    sync_ms: float = Field(20.0, gt=0, le=10_000, description="how often a replica exchanges load and routed "
                           "prompts with its peers")
    heartbeat_s: float = Field(1.0, gt=0, le=3600, description="a replica's report is refreshed at least this often "
                               "and expires after two: a dead replica's share of the load is gone within two "
                               "heartbeats")
    timeout_ms: float = Field(500.0, gt=0, le=60_000, description="one Redis command; beyond, the replica serves on "
                              "its local view (degraded) until Redis answers again")
    route_ttl_s: float = Field(300.0, gt=0, description="peers' routed prompts older than this are not folded in")
    route_entries: int = Field(100_000, ge=100, description="routed prompts the stream keeps")
    route_blocks: int = Field(65_536, ge=64, description="prompt blocks (16 tokens) each replica remembers to "
                              "rebuild peers' routed prompts")
    queries_ttl_s: float = Field(3600.0, gt=0, description="finished workflow queries answer GET /v1/queries/ID on "
                                 "every replica for this long")
    programs_ttl_s: float = Field(3600.0, gt=0, description="an ended program's record is kept this long")
    summary_wait_s: float = Field(30.0, ge=0, le=3600, description="while the state is lost, DELETE of a program "
                                  "waits this long for it (the summary needs every replica's part), then answers "
                                  "with this replica's part, marked partial")


class GatewaySettings(Strict):
    """The `gateway:` section of a serving YAML (`flowserve serve --config`); every field is
    optional."""

    dispatch: str | dict[str, Any] = Field("round_robin", description="dispatch policy (see the policy catalogue): "
                                           "a name, an import path, a scoring profile's file (relative to this "
                                           "YAML) or a scoring profile inline (`{scorers: [...]}`)")
    queue: str = Field("fcfs", description="queue policy of every instance (see the policy catalogue)")
    dispatch_params: dict[str, Any] = Field(default_factory=dict, description="the dispatch policy's parameters, "
                                            "e.g. `{binding: late}`")
    queue_params: dict[str, Any] = Field(default_factory=dict, description="the queue policy's parameters, e.g. "
                                         "`{tenant_weights: {gold: 3, free: 1}}`")
    passes: str = Field("none", description="graph passes on every workflow batch: none, all, or a comma-separated "
                        "list")
    time_scale: float = Field(1.0, gt=0, description="simulated engines: simulated seconds per real second "
                              "(10: ten times faster than the modelled GPU)")
    request_timeout_s: float = Field(300.0, gt=0, description="one engine request, first byte to last")
    connect_timeout_s: float = Field(5.0, gt=0, description="opening a connection to an engine")
    retries: int = Field(2, ge=0, description="same-instance retries of a retryable engine error (connection, "
                         "timeout, 5xx, 408, 429)")
    retry_backoff_s: float = Field(0.05, ge=0, description="first retry's back-off, doubled per retry")
    retry_backoff_cap_s: float = Field(1.0, ge=0, description="longest back-off between retries")
    redispatch_limit: int = Field(3, ge=0, description="times the core re-dispatches a failed call to another "
                                  "instance")
    breaker_failures: int = Field(3, ge=1, description="consecutive transport failures that open an instance's "
                                  "circuit")
    breaker_cooldown_s: float = Field(1.0, gt=0, description="wait before the first half-open probe; doubles per "
                                      "failed probe")
    breaker_max_cooldown_s: float = Field(30.0, gt=0, description="longest wait between half-open probes")
    max_queue_s: float | None = Field(None, ge=0, description="admission control: refuse (429) a query whose "
                                      "predicted queueing delay on the best instance exceeds this; null: off")
    max_queries: int = Field(10_000, ge=1, description="open queries at most; beyond, 429")
    drain_timeout_s: float = Field(30.0, ge=0, description="graceful shutdown: how long open queries may finish")
    max_body_bytes: int = Field(16 << 20, ge=1024, le=1 << 30, description="a request body above this is refused "
                                "(413) before it is read; 16 MiB holds a 1M-token prompt as text or as token ids")
    sql_time_limit_s: float = Field(5.0, gt=0, le=3600, description="one statement of the `sql` tool (the SQL "
                                    "sandbox)")
    sql_workers: int = Field(2, ge=1, le=64, description="warm worker processes that run the `sql` tool's "
                             "statements")
    sql_memory_mb: int = Field(1024, ge=64, le=1 << 20, description="address space one `sql` statement may add "
                               "(RLIMIT_AS, MiB)")
    jobs: Literal["thread", "process"] = Field("process", description="where background jobs (RunJob, e.g. the "
                                               "α sweep) run")
    default_max_tokens: int = Field(256, ge=1, description="max_tokens of a request that gives none")
    cache_tokens: dict[str, int] = Field(default_factory=dict, description="per instance: tokens of the driver's "
                                         "cache estimate (default: the KV capacity)")
    slots_poll_s: float = Field(2.0, ge=0, description="how often the gateway reads an engine's /slots (llama-server) "
                                "to top its cache estimate up with the slots' prompts; 0: never")
    cache_sequences: dict[str, int] = Field(default_factory=dict, description="per instance: slot caches of the "
                                            "estimate (default: the profile's slots)")
    engine_kinds: dict[str, Literal["llamacpp", "vllm", "sglang", "openai"]] = Field(
        default_factory=dict, description="per instance: the engine's kind (default: detected)")
    tokenizers: dict[str, str] = Field(default_factory=dict, description="per model: a tokenizer.json to tokenize "
                                       "locally (default: the engine's /tokenize)")
    chat_templates: dict[str, str] = Field(default_factory=dict, description="per model: a tokenizer_config.json "
                                           "(or .jinja) whose chat template renders chats locally (else the engines "
                                           "render them)")
    workflows: dict[str, dict[str, Any]] = Field(default_factory=dict, description="per registered workflow: its "
                                                 "settings, e.g. `text2sql: {databases: {bank: builtin}}`; or a "
                                                 "user's own: `NAME: {app: package.module:Class, ...kwargs}`")
    programs: ProgramSettings = Field(default_factory=ProgramSettings, description="programs: OpenAI calls that "
                                      "carry x-flowserve-program (limits, idle timeout)")
    record: str | None = Field(None, description="a folder: every finished program and workflow query as one JSON "
                               "line of the agent-trace format (`flowserve simulate` replays it)")
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings, description="the components that run "
                                         "the retrieval ops")
    admin_keys: list[str] | None = Field(None, description="bearer keys of the admin endpoints and /status.json "
                                         "(default: the `api_keys` when they are a plain list; keys that name "
                                         "tenants are not administrators)")
    metrics_tenants: int = Field(20, ge=0, le=1000, description="per-tenant metric series: the N tenants with the "
                                 "most tokens have their own, the others are summed as tenant=\"other\"")
    max_messages: int = Field(2048, ge=1, le=1_000_000, description="messages of one chat request; beyond, 400 "
                              "before any work (OpenAI's limit is 2048)")
    max_tools: int = Field(128, ge=1, le=100_000, description="tools of one chat request; beyond, 400 before any "
                           "work (OpenAI's limit is 128)")
    max_header_bytes: int = Field(64 << 10, ge=1024, le=16 << 20, description="a request's head (request line and "
                                  "headers); beyond, 431 and the connection closes")
    max_headers: int = Field(100, ge=8, le=10_000, description="headers of one request; beyond, 431 and the "
                             "connection closes")
    header_timeout_s: float = Field(30.0, gt=0, le=3600, description="a connection that has not sent a whole "
                                    "request head this long after it opened (or after its last answer, while a "
                                    "next request is under way) is closed")
    state: StateSettings | None = Field(None, description="replicas: share load, programs, tenants, queries and "
                                        "routed prefixes through Redis (`{url: redis://HOST:PORT/DB}`); null: this "
                                        "process alone")

    @field_validator("admin_keys")
    @classmethod
    def _admin_keys(cls, v: list[str] | None) -> list[str] | None:
        if v is not None:
            api_keys(v)  # the same rules as the api_keys' (a ValueError names the fault)
        return v

    @model_validator(mode="after")
    def _policies_exist(self) -> GatewaySettings:
        make_dispatch(self.dispatch, self.dispatch_params)
        queue_factory(self.queue, self.queue_params)
        make_passes(self.passes)
        return self


@dataclass(frozen=True)
class ServeConfig:
    instances: tuple[InstanceSpec, ...]
    keys: ApiKeys = field(default_factory=ApiKeys)
    gateway: GatewaySettings = field(default_factory=GatewaySettings)

    @property
    def api_keys(self) -> tuple[str, ...]:
        return self.keys.keys

    @property
    def admin_keys(self) -> tuple[str, ...]:
        """The admin endpoints' keys: `gateway.admin_keys`, else a plain list's `api_keys`
        (keys that name tenants are not administrators: see `admin_closed`)."""
        keys = self.gateway.admin_keys
        if keys is not None:
            return tuple(keys)
        return self.keys.keys if self.keys.listed else ()

    @property
    def admin_closed(self) -> bool:
        """Keys guard the API but none is an administrator's (api_keys that name tenants,
        and no `gateway.admin_keys`): the admin endpoints refuse every request."""
        return bool(self.keys) and not self.admin_keys

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
    for model, path in gateway.chat_templates.items():
        try:
            ChatTemplate.from_file(Path(path))
        except TemplateError as e:
            raise ConfigError(f"{source}: gateway.chat_templates: {model}: {e}") from None
    return ServeConfig(specs, api_keys(cluster.api_keys), gateway)


def load_serve_config(path: str | Path) -> ServeConfig:
    """A serving YAML; `profile:` paths and a dispatch profile's file are relative to it, as
    in cluster files."""
    data = _profiles_relative_to(read_yaml(path), Path(path).parent)
    gw = data.get("gateway")
    if isinstance(gw, dict) and isinstance(gw.get("dispatch"), str) and looks_like_path(gw["dispatch"]) \
            and not Path(gw["dispatch"]).is_absolute():
        data = {**data, "gateway": {**gw, "dispatch": str(Path(path).parent / gw["dispatch"])}}
    return serve_config(data, str(path))
