"""examples/my_policy, installed as a package: its entry point makes `earliest_finish` a
policy name in the simulator, `bench compare` and the gateway, without a line of
flowserve changed. (Its own hand-computed tests run as getting started shows them:
tests/docs/test_getting_started.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "my_policy"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The example installed into its own folder (the test venv stays as it is)."""
    target = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("build")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(EXAMPLE)], check=True, cwd=build, timeout=300)
    assert (target / "my_policy" / "sched.py").is_file()
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}


def run(env: dict[str, str], *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_the_entry_point_name_works_in_simulate_and_compare(installed: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    res = run(installed, "-m", "flowserve.cli", "simulate", "--dispatch", "earliest_finish", "--set",
              "workload.queries=8", "--slo-scales", "4", "--json", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(out.read_text())["completed"] == 8
    script = ("import flowserve; r = flowserve.compare(['text2sql'], ['earliest_finish', 'llmd'], quick=True, "
              "queries=6, oracle=False); print(sorted(r['cases'][0]['results']))")
    res = run(installed, "-c", script)
    assert res.returncode == 0, res.stderr
    assert "'earliest_finish+fcfs', 'llmd'" in res.stdout


def test_the_gateway_serves_with_it(installed: dict[str, str]) -> None:
    script = """
import flowserve, openai
cfg = {"instances": [{"name": "sim", "gpu": "A100-80G", "model": "llama-3.1-8b", "count": 2}],
       "api_keys": ["sk-k"], "gateway": {"time_scale": 200.0}}
with flowserve.serve(cfg, port=0, dispatch="earliest_finish", background=True) as srv:
    c = openai.OpenAI(base_url=srv.url + "/v1", api_key="sk-k", max_retries=0)
    print(c.completions.create(model="llama-3.1-8b", prompt="hi", max_tokens=3).usage.completion_tokens,
          type(srv.app.state.gateway.driver.dispatch).__name__)
"""
    res = run(installed, "-c", script)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["3", "EarliestFinish"]
