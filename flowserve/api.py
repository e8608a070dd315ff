"""The public Python API: simulate a policy, compare policies, serve, pick for Envoy (re-exported by
`flowserve`). Every argument takes what the CLI takes — a built-in name or a file — and
also the Python objects behind it: a mapping for a config, `InstanceSpec`s, a `Workload`,
a policy class or object. The numbers are the CLI's: `flowserve simulate` and
`flowserve bench compare` call these functions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowserve.errors import ConfigError
from flowserve.policies.registry import PolicyRef, parameter_names, policy_name
from flowserve.types.specs import InstanceSpec

if TYPE_CHECKING:
    import pandas as pd

    from flowserve.gateway.server import BackgroundServer
    from flowserve.host.settings import ServeConfig
    from flowserve.picker.server import PickerServer
    from flowserve.sim.simulator import SimResult
    from flowserve.workloads.base import Workload

ClusterRef = str | Mapping[str, Any] | Sequence[InstanceSpec]
DEFAULT_SLO_SCALES = (1, 2, 4, 8, 16)
CACHE_VIEWS = ("precise", "estimated", "configured", "engine")  # `flowserve.sim.kv_views.CacheView`


def cluster_specs(cluster: ClusterRef, engine: Mapping[str, Any] | None = None) -> tuple[InstanceSpec, ...]:
    """A built-in cluster name or YAML file, a cluster config mapping (a serving config's
    `gateway:` section is ignored), or instance specs."""
    from flowserve.config import ClusterConfig, load_cluster
    from flowserve.schema import validate

    if isinstance(cluster, str | Path):
        return load_cluster(str(cluster), engine)
    if isinstance(cluster, Mapping):
        data = {k: v for k, v in cluster.items() if k != "gateway"}
        if engine and isinstance(data.get("instances"), list):
            data["instances"] = [{**i, **engine} if isinstance(i, dict) else i for i in data["instances"]]
        return validate(ClusterConfig, data, "cluster").specs()
    specs = tuple(cluster) if isinstance(cluster, Sequence) else ()
    if not specs or not all(isinstance(s, InstanceSpec) for s in specs):
        raise ConfigError("cluster: expected a name, a file, a mapping or a non-empty sequence of InstanceSpec")
    return specs


def check_policy_ref(value: Any, what: str) -> None:
    """A policy reference as every function here takes it (ConfigError naming `what`)."""
    from flowserve import DispatchPolicy, QueuePolicy

    if isinstance(value, Mapping) and what == "dispatch":
        return  # a scoring profile, checked when it is built
    if not isinstance(value, str | type | DispatchPolicy | QueuePolicy):
        raise ConfigError(f"{what}: expected a policy name, an import path 'package.module:Class', a policy class "
                          f"or object{', or a scoring profile (a mapping)' if what == 'dispatch' else ''}, got "
                          f"{type(value).__name__}")


def check_mapping(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ConfigError(f"{what}: expected a mapping of names to values, got {type(value).__name__}")
    return value


def check_numbers(value: Any, what: str) -> list[float]:
    """A sequence of real numbers (a string is not one: "12" would read as 1 and 2)."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in value):
        raise ConfigError(f"{what}: expected numbers (a list or tuple), got {value!r}"[:200])
    return [float(x) for x in value]


def route_params(dispatch: PolicyRef, queue: PolicyRef, params: Mapping[str, Any]) -> tuple[dict, dict]:
    """Keyword parameters to the policy whose constructor declares them (dispatch or queue)."""
    d_params, q_params = {}, {}
    d_names = parameter_names("dispatch", dispatch)
    q_names = parameter_names("queue", queue)
    for key, value in params.items():
        if key in d_names and key in q_names:
            raise ConfigError(f"parameter {key!r} belongs to both policies: pass it in dispatch_params or "
                              f"queue_params")
        if key in d_names:
            d_params[key] = value
        elif key in q_names:
            q_params[key] = value
        else:
            raise ConfigError(f"parameter {key!r}: neither {policy_name(dispatch)!r} nor {policy_name(queue)!r} "
                              f"takes it (dispatch: {', '.join(sorted(d_names))}; "
                              f"queue: {', '.join(sorted(q_names)) or 'none'})")
    return d_params, q_params


class SimulationResult(Mapping[str, Any]):
    """What `flowserve simulate --json` writes, as a mapping (and as attributes), plus the
    run's queries and calls as pandas DataFrames and the runs themselves (per SLO scale)."""

    def __init__(self, summary: dict[str, Any], runs: Mapping[float, SimResult], workload: Workload) -> None:
        self.summary = summary
        self.runs = dict(runs)
        self.workload = workload

    def __getitem__(self, key: str) -> Any:
        return self.summary[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.summary)

    def __len__(self) -> int:
        return len(self.summary)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["summary"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        m = self.summary.get("min_slo_scale", {})
        return (f"SimulationResult({self.summary['policy']['dispatch']}+{self.summary['policy']['queue']} on "
                f"{self.summary['workload']}: min SLO scale {m.get('0.95')} @95%, "
                f"mean latency {self.summary['latency_s']['mean']})")

    @property
    def primary(self) -> SimResult:
        """The run the latency, throughput and call figures come from (the largest scale)."""
        return self.runs[max(self.runs)]

    @property
    def queries(self) -> pd.DataFrame:
        """One row per query of the primary run: arrival, finish, latency, deadline, met, failed."""
        import pandas as pd

        return pd.DataFrame([dataclasses.asdict(q) for q in self.primary.queries])

    @property
    def calls(self) -> pd.DataFrame:
        """One row per finished LLM call of the primary run (`flowserve.core.CallRecord`)."""
        import pandas as pd

        return pd.DataFrame([dataclasses.asdict(c) for c in self.primary.calls])


def simulate(
    cluster: ClusterRef = "hetero-1",
    workload: str | Mapping[str, Any] | Workload = "text2sql",
    dispatch: PolicyRef = "round_robin",
    queue: PolicyRef = "fcfs",
    *,
    slo_scales: Sequence[float] = DEFAULT_SLO_SCALES,
    seed: int | None = None,
    passes: str = "none",
    dispatch_params: Mapping[str, Any] | None = None,
    queue_params: Mapping[str, Any] | None = None,
    workload_params: Mapping[str, Any] | None = None,
    engine_params: Mapping[str, Any] | None = None,
    progress: Callable[[], None] | None = None,
    replicas: int = 1,
    sync_ms: float = 20.0,
    cache_view: str = "configured",
    **params: Any,
) -> SimulationResult:
    """Simulate one policy pair on a cluster and workload at each SLO scale.

    cluster: a built-in name, a cluster or serving YAML, a mapping, or `InstanceSpec`s;
    workload: a built-in name, a workload YAML or JSONL trace, a mapping (`{"kind": ...}`),
    or a `Workload`; dispatch/queue: a name, an import path `package.module:Class`, a
    class or a ready object; replicas: that many schedulers taking queries in turn and
    syncing every `sync_ms` (`flowserve.sim.replicas`); cache_view: how the router learns what
    the engines cache — `precise` (KV-cache events), `estimated` (the gateway's estimate),
    `configured` (the default, as `flowserve simulate`: precise where an instance has
    `kv_events`, estimated elsewhere) or `engine` (every eviction reported). `**params`
    go to the policy whose constructor takes them."""
    from flowserve.graph.passes import make_passes
    from flowserve.profiles.instance import max_context
    from flowserve.sim.evaluate import evaluate
    from flowserve.sim.run import PolicySpec
    from flowserve.workloads.base import Workload
    from flowserve.workloads.registry import load_workload

    check_policy_ref(dispatch, "dispatch")
    check_policy_ref(queue, "queue")
    dispatch_params, queue_params = check_mapping(dispatch_params, "dispatch_params"), \
        check_mapping(queue_params, "queue_params")
    workload_params = check_mapping(workload_params, "workload_params")
    engine_params = check_mapping(engine_params, "engine_params")
    scales = check_numbers(slo_scales, "slo_scales")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ConfigError(f"seed: expected an integer, got {seed!r}")
    if not isinstance(cluster, str | Path | Mapping | Sequence):
        raise ConfigError(f"cluster: expected a name, a file, a mapping or a non-empty sequence of InstanceSpec, "
                          f"got {type(cluster).__name__}")
    specs = cluster_specs(cluster, engine_params)
    if isinstance(workload, Workload):
        if workload_params or seed is not None:
            raise ConfigError("workload_params and seed configure a workload by name, file or mapping, "
                              "not a ready Workload")
        wl = workload
    else:
        overrides = dict(workload_params or {})
        if seed is not None:
            overrides["seed"] = seed
        llm = [max_context(s) for s in specs if s.kind == "llm"]
        wl = load_workload(workload, overrides, min(llm) if llm else None)
    make_passes(passes)  # a clear error before any work
    routed_d, routed_q = route_params(dispatch, queue, params)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= 64:
        raise ConfigError(f"replicas: expected 1 to 64, got {replicas!r}")
    if isinstance(sync_ms, bool) or not isinstance(sync_ms, int | float) or not 0 < sync_ms <= 60_000:
        raise ConfigError(f"sync_ms: expected a number of milliseconds in (0, 60000], got {sync_ms!r}")
    if replicas > 1 and not isinstance(dispatch, str | type):
        raise ConfigError("replicas: each replica makes its own dispatch policy: give it by name, import path or "
                          "class, not as a ready object")
    if cache_view not in CACHE_VIEWS:
        raise ConfigError(f"cache_view: expected one of {', '.join(CACHE_VIEWS)}, got {cache_view!r}")
    policy = PolicySpec(dispatch, queue, {**(dispatch_params or {}), **routed_d},
                        {**(queue_params or {}), **routed_q}, passes, replicas, float(sync_ms))
    if not scales or any(not s > 0 for s in scales):
        raise ConfigError("slo_scales: expected positive numbers")
    summary, runs = evaluate(specs, wl, policy, scales, progress=progress, cache_view=cache_view)  # type: ignore[arg-type]
    summary["cluster"] = str(cluster) if isinstance(cluster, str | Path) else "custom"
    summary["notes"] = list(wl.notes)
    return SimulationResult(summary, runs, wl)


def compare(
    workloads: Sequence[str] | None = None,
    policies: Sequence[Any] | None = None,
    *,
    quick: bool = False,
    seed: int = 0,
    queries: int | None = None,
    oracle: bool = True,
    out: str | Path | None = None,
    console: Any = None,
    cluster: str = "hetero-1",
) -> dict[str, Any]:
    """`flowserve bench compare`: each contestant on each workload, side by side (a workload
    may be a recorded trace, `FILE.jsonl`, run on `cluster`).

    policies: contestant labels of the bench (`flowserve`, `llmd`, ...), `DISPATCH+QUEUE`
    strings (names or import paths), policy classes, or (dispatch, queue) pairs; default:
    every built-in contestant. Returns the JSON the bench writes."""
    from rich.console import Console

    from flowserve.output_paths import check_output
    from flowserve.sim.compare import contestants, run_compare_bench

    if workloads is not None and (isinstance(workloads, str) or not isinstance(workloads, Sequence)):
        raise ConfigError(f"workloads: expected a list of workload names or trace files, got {workloads!r}")
    if policies is not None and (isinstance(policies, str) or not isinstance(policies, Sequence)):
        raise ConfigError(f"policies: expected a list of contestants, got {policies!r}")
    for pick in policies or ():
        for ref in pick if isinstance(pick, tuple) else (pick,):
            check_policy_ref(ref, f"policies: {pick!r}")
    if out is not None:
        check_output(Path(out), "out", folder=True)  # before the benchmark runs, not after
    picked = contestants(policies)
    return run_compare_bench(Path(out or "out/bench-compare"), quick, console or Console(quiet=out is None),
                             workloads, picked, oracle, seed, queries, cluster=cluster)


def _serve_config(config: str | Path | Mapping[str, Any] | ServeConfig, dispatch: PolicyRef | None,
                  queue: PolicyRef | None) -> ServeConfig:
    from flowserve.host.settings import ServeConfig, load_serve_config, serve_config

    if isinstance(config, ServeConfig):
        cfg = config
    elif isinstance(config, Mapping):
        cfg = serve_config(dict(config), "serve config")
    elif isinstance(config, str | Path):
        cfg = load_serve_config(config)
    else:
        raise ConfigError(f"config: expected a YAML path, a mapping or a ServeConfig, got {type(config).__name__}")
    for ref, what in ((dispatch, "dispatch"), (queue, "queue")):
        if ref is not None:
            check_policy_ref(ref, what)
    if dispatch is not None or queue is not None:
        cfg = cfg.with_policies(None if dispatch is None else policy_name(dispatch),
                                None if queue is None else policy_name(queue))
    return cfg


def serve(
    config: str | Path | Mapping[str, Any] | ServeConfig,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    dispatch: PolicyRef | None = None,
    queue: PolicyRef | None = None,
    log_level: str = "info",
    workers: int = 1,
    background: bool = False,
) -> BackgroundServer | None:
    """Run the gateway for a serving config (a YAML path, a mapping or a `ServeConfig`);
    `dispatch`/`queue` replace the config's policies (names or import paths). Blocks until
    stopped, or with `background=True` returns a started server in this process (a context
    manager; `.url`, `.stop()`)."""
    check_serving(host, port, log_level, workers, background)
    cfg = _serve_config(config, dispatch, queue)
    if background:
        from flowserve.gateway.app import create_app
        from flowserve.gateway.server import BackgroundServer

        return BackgroundServer(create_app(cfg), host, log_level=log_level, port=port).start()
    from flowserve.gateway.server import serve as run_server

    run_server(cfg, host, port, log_level, workers)
    return None


def epp(
    config: str | Path | Mapping[str, Any] | ServeConfig,
    host: str = "127.0.0.1",
    port: int = 9002,
    *,
    metrics_port: int | None = None,
    dispatch: PolicyRef | None = None,
    queue: PolicyRef | None = None,
    log_level: str = "info",
    background: bool = False,
) -> PickerServer | None:
    """Run flowserve as Envoy's endpoint picker (the Gateway API Inference Extension's
    protocol over ext_proc) for a serving config, as `serve` takes it; every LLM instance
    needs the engine's `url`. Blocks until stopped, or with `background=True` returns a
    started picker in this process (a context manager; `.port`, `.stop_background()`)."""
    from flowserve.picker.server import PickerServer

    cfg = _serve_config(config, dispatch, queue)
    server = PickerServer(cfg, host, port, metrics_port, log_level)
    if background:
        return server.start_background()
    server.run()
    return None


LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def check_serving(host: Any, port: Any, log_level: Any, workers: Any, background: bool) -> None:
    """`serve`'s arguments, each refused by name (uvicorn would fail later, and unclearly)."""
    if not isinstance(host, str):
        raise ConfigError(f"host: expected a string, got {type(host).__name__}")
    if not isinstance(port, int) or isinstance(port, bool):
        raise ConfigError(f"port: expected an integer, got {port!r}")
    if background and not 0 <= port <= 65535:  # 0: a free port (in the foreground, `bind` checks it)
        raise ConfigError(f"port: expected 1 to 65535 (or 0: any free port), got {port}")
    if log_level not in LOG_LEVELS:
        raise ConfigError(f"log_level: expected one of {', '.join(LOG_LEVELS)}, got {log_level!r}")
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ConfigError(f"workers: expected a positive integer, got {workers!r}")
    if background and workers != 1:
        raise ConfigError(f"workers: a background server runs in this process, with one worker (got {workers})")
