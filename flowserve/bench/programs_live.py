"""The live half of `flowserve bench programs`: the simulated run's programs through
`flowserve serve` on simulated engines (`gateway.time_scale` times faster than the GPU),
played by `flowserve.loadtest.program_client` in its own process; the gateway records them
(`gateway.record`) and the recording is replayed in the simulator — the loop a user runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from flowserve.bench.programs_setup import CLUSTER, CONTESTANTS, figures
from flowserve.engines.llamacpp_server import free_port
from flowserve.errors import FlowserveError
from flowserve.host.settings import serve_config
from flowserve.loadtest.procs import served
from flowserve.sim.run import PolicySpec, simulate
from flowserve.workloads import load_workload
from flowserve.workloads.agent_trace import read_agent_trace
from flowserve.workloads.program_trace import TracedQuery, query_json

TIME_SCALE = 5.0  # simulated seconds per real second (higher magnifies the gateway's own delays)


def slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name)


@dataclass(frozen=True)
class LiveArm:
    """One live run: a policy, and whether the client sends the program headers."""

    name: str
    policy: PolicySpec
    headers: bool = True


def replayed(path: Path, arm: LiveArm, cluster_config: Mapping[str, Any]) -> dict[str, Any]:
    """The gateway's recording of a run, simulated with the same policy."""
    # the workload replays them in arrival order (the file lists them as they ended)
    deadlines = [q.deadline_s for q in sorted(read_agent_trace(str(path)).traced, key=lambda q: q.arrival or 0.0)]
    wl = load_workload(str(path))
    specs = serve_config(dict(cluster_config), "bench programs").instances
    return figures(simulate(specs, wl, arm.policy, deadlines=deadlines))


def arms_of(names: Sequence[str]) -> list[LiveArm]:
    return [LiveArm(n, CONTESTANTS[n]) for n in names]


def run_live(traced: Sequence[TracedQuery], arms: Sequence[LiveArm], out: Path, say: Callable[[str], None],
             time_scale: float = TIME_SCALE, cluster_config: Mapping[str, Any] = CLUSTER) -> dict[str, Any]:
    """Each arm's programs through `flowserve serve`; the first arm's mean latency over the
    last's is the live ratio. An arm with headers is also replayed from the gateway's
    recording (without them the recording holds single calls, not the programs)."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    traces = out / "live-programs.jsonl"
    traces.write_text("".join(json.dumps(query_json(q, {"id": i})) + "\n" for i, q in enumerate(traced)))
    py = sys.executable
    rows: dict[str, dict[str, Any]] = {}
    shares = []
    for arm in arms:
        name, policy = arm.name, arm.policy
        rec = out / f"recorded-{slug(name)}"
        shutil.rmtree(rec, ignore_errors=True)
        cfg = out / f"serve-{slug(name)}.yaml"
        cfg.write_text(yaml.safe_dump({**cluster_config, "gateway": {
            "dispatch": policy.dispatch, "queue": policy.queue, "dispatch_params": dict(policy.dispatch_params),
            "queue_params": dict(policy.queue_params), "time_scale": time_scale, "record": str(rec),
            "max_queries": 100_000}}))
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        result = out / f"live-{slug(name)}.json"
        say(f"live {name}: {len(traced)} programs at time scale {time_scale:g}")
        load0 = os.getloadavg()[0]
        with served([py, "-c", "from flowserve.cli import app; app()", "serve", "--config", str(cfg), "--port",
                     str(port), "--log-level", "warning"], f"{url}/health", out / f"serve-{slug(name)}.log"):
            done = subprocess.run([py, "-m", "flowserve.loadtest.program_client", url, str(traces), str(time_scale),
                                   str(result), *(() if arm.headers else ("--no-headers",))],
                                  capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise FlowserveError(f"the program client failed: {done.stderr.strip()[-500:]}")
        data = json.loads(result.read_text())
        programs = data["programs"]
        lat = np.array([p["latency_s"] for p in programs])
        row = {"programs": len(programs), "mean_s": float(lat.mean()), "p95_s": float(np.percentile(lat, 95)),
               "attainment": float(np.mean([bool(p["met"]) for p in programs])),
               "errors": sum(len(p["errors"]) for p in programs),
               "late_start_max_s": max(p["late_start_s"] for p in programs),
               "loadavg_before": round(load0, 2), "loadavg_after": round(os.getloadavg()[0], 2)}
        row["headers"] = arm.headers
        if arm.headers:
            [recorded] = rec.glob("trace-*.jsonl")
            row["recorded"] = str(recorded)
            replay = replayed(recorded, arm, cluster_config)
            row["replayed_mean_s"], row["replayed_p95_s"] = replay["mean_s"], replay["p95_s"]
        rows[name] = row
        shares.append(data["client_cpu_share"])
        say(f"live {name}: mean {row['mean_s']:.1f} s, p95 {row['p95_s']:.0f} s, SLO {row['attainment']:.0%}, "
            f"{row['errors']} errors" + (f"; its recording simulated: mean {row['replayed_mean_s']:.1f} s"
                                         if arm.headers else ""))
    base, ours = arms[0].name, arms[-1].name
    out_rows = {"contestants": rows, "time_scale": time_scale, "loadavg": [round(x, 2) for x in os.getloadavg()],
                "client_cpu_share": round(max(shares), 3), "ratio": rows[base]["mean_s"] / rows[ours]["mean_s"]}
    if arms[0].headers and arms[-1].headers:
        out_rows["replayed_ratio"] = rows[base]["replayed_mean_s"] / rows[ours]["replayed_mean_s"]
    return out_rows
