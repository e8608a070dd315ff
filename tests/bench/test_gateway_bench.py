"""`flowserve bench gateway`'s parts that run in a test's time: wrk, and the Python load
generator that stands in for it where wrk is not installed, against the instant backend
(their numbers read back), and the options it refuses before starting anything."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.engines.llamacpp_server import free_port
from flowserve.loadtest.procs import served
from flowserve.loadtest.wrk import run_load, run_wrk


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (Debian's package wrk: "
                                                        "apt-get install -y wrk)")
def test_wrk_measures_the_instant_backend(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with served([sys.executable, "-m", "flowserve.loadtest.instant_backend", str(port)], f"{url}/health",
                tmp_path / "backend.log"):
        plain = run_wrk(f"{url}/v1/completions", 2, 1, False, "llama-3.1-8b", tmp_path)
        missing = run_wrk(f"{url}/v1/nothing-here", 1, 1, False, "llama-3.1-8b", tmp_path)
    assert plain["requests"] > 10 and plain["errors"] == 0 and 0 < plain["p50_ms"] <= plain["p99_ms"]
    assert plain["req_per_s"] > 0 and plain["seconds"] > 0.5
    assert missing["requests"] > 0 and missing["errors"] == missing["requests"]  # every 404 counted


def test_bad_options_are_refused_before_anything_starts() -> None:
    runner = CliRunner()
    for args, message in ((["--shapes", "gateway,proxy"], "--shapes"), (["--body-mode", "STREAMED"], "--body-mode")):
        r = runner.invoke(app, ["bench", "gateway", "--policies", "round_robin", *args])
        assert r.exit_code == 2 and message in r.output, r.output


def test_without_wrk_the_python_load_generator_measures_and_says_how_busy_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # wrk hidden, python found
    assert shutil.which("wrk") is None
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with served([sys.executable, "-m", "flowserve.loadtest.instant_backend", str(port)], f"{url}/health",
                tmp_path / "backend.log"):
        plain = run_load(f"{url}/v1/completions", 2, 1, False, "llama-3.1-8b", tmp_path)
        stream = run_load(f"{url}/v1/completions", 2, 1, True, "llama-3.1-8b", tmp_path)
        missing = run_load(f"{url}/v1/nothing-here", 1, 1, False, "llama-3.1-8b", tmp_path)
    for r in (plain, stream):
        assert r["client"] == "python" and r["requests"] > 10 and r["errors"] == 0
        assert 0 < r["p50_ms"] <= r["p99_ms"] and r["seconds"] > 0.5 and 0 < r["client_cpu_share"] <= 1.5
    assert missing["requests"] > 0 and missing["errors"] == missing["requests"]  # every 404 counted
