"""wrk as the load generator of `flowserve bench gateway`: one run of `wrk` against a target,
its numbers read back as JSON.

Requests are distinct prompts over 8 shared prefixes (`/v1/completions`, 64 output tokens;
streamed or not) made per request by a Lua script, with an API key. The script's `done`
prints requests, errors (socket errors, timeouts and answers other than 2xx/3xx) and latency
percentiles as one JSON line. wrk comes from the system's packages (Debian:
`apt-get install -y wrk`); without it, `run_load` measures with flowserve's slower Python
load generator (`flowserve.loadtest.pyload`), which says how busy it was.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from flowserve.errors import FlowserveError

SCRIPT = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer bench"
local counter = 0
local stream = "__STREAM__"
request = function()
  -- 2,048 distinct prompts over 8 shared prefixes, in turn: past the first pass the routers'
  -- own costs are measured (flowserve's tokenizations are cached, as for repeated prompts)
  counter = counter + 1
  local n = counter % 2048
  local prefix = string.rep("shared prefix " .. (n % 8) .. " ", 8)
  local body = string.format('{"model": "__MODEL__", "prompt": "%squestion %d", "max_tokens": 64, "stream": %s}',
                             prefix, n, stream)
  return wrk.format(nil, "__PATH__", nil, body)
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('FLOWSERVE {"requests": %d, "duration_us": %d, "errors": %d, ' ..
    '"p50_us": %d, "p99_us": %d}\n', summary.requests, summary.duration,
    e.connect + e.read + e.write + e.timeout + e.status, latency:percentile(50), latency:percentile(99)))
end
"""


def wrk_binary() -> str:
    path = shutil.which("wrk")
    if path is None:
        raise FlowserveError("wrk is not installed; `flowserve bench gateway` measures with it "
                             "(Debian/Ubuntu: apt-get install -y wrk)")
    return path


def run_wrk(url: str, clients: int, seconds: float, stream: bool, model: str, work_dir: Path) -> dict[str, Any]:
    """`clients` keep-alive connections for `seconds` against `url` (a POST path)."""
    base, _, path = url.partition("://")[2].partition("/")
    script = work_dir / f"wrk-{'stream' if stream else 'plain'}.lua"
    script.write_text(SCRIPT.replace("__STREAM__", "true" if stream else "false").replace("__MODEL__", model)
                      .replace("__PATH__", "/" + path))
    threads = min(clients, 2)
    cmd = [wrk_binary(), "-t", str(threads), "-c", str(clients), "-d", f"{max(1, round(seconds))}s",
           "--timeout", "10s", "-s", str(script), f"http://{base}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    line = next((x for x in out.stdout.splitlines() if x.startswith("FLOWSERVE ")), None)
    if out.returncode != 0 or line is None:
        raise FlowserveError(f"wrk failed against {url}: {(out.stderr or out.stdout).strip()[-300:]}")
    data = json.loads(line.removeprefix("FLOWSERVE "))
    secs = data["duration_us"] / 1e6
    return {"requests": data["requests"], "seconds": secs, "errors": data["errors"],
            "req_per_s": data["requests"] / secs if secs else 0.0, "p50_ms": data["p50_us"] / 1000,
            "p99_ms": data["p99_us"] / 1000}


PYLOAD_NOTE = ("wrk is not installed (Debian/Ubuntu: apt-get install -y wrk): measured with flowserve's Python load "
               "generator, which is slower than wrk: its own time per request is in every latency (the latency "
               "added over the bare backend, measured with the same generator, is what compares), and where it "
               "used most of a core (client_cpu_share near 1) req/s is its own limit, not the router's")


def run_load(url: str, clients: int, seconds: float, stream: bool, model: str, work_dir: Path) -> dict[str, Any]:
    """wrk where it is installed (`client`: "wrk"), else the Python load generator in its own
    process (`client`: "python", with `client_cpu_share`)."""
    if shutil.which("wrk") is not None:
        return {**run_wrk(url, clients, seconds, stream, model, work_dir), "client": "wrk"}
    cmd = [sys.executable, "-m", "flowserve.loadtest.pyload", url, str(clients), str(seconds),
           "true" if stream else "false", model]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    line = next((x for x in out.stdout.splitlines() if x.startswith("FLOWSERVE ")), None)
    if out.returncode != 0 or line is None:
        raise FlowserveError(f"the load generator failed against {url}: {(out.stderr or out.stdout).strip()[-300:]}")
    return json.loads(line.removeprefix("FLOWSERVE "))
