"""docs/getting-started.md as a newcomer follows it: every command of its walk-through runs
from the repository root with this environment's `flowserve`, `python` and `pytest`, as
written, changed only where a test must: a free port for 8000, fewer simulated queries,
output under a temporary folder, `pip install -e examples/my_policy` into a temporary
folder (this environment stays as it is), and the gateway the page starts with `&` run by
a fixture. The README's three-line program snippet runs against the same gateway."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from flowserve.engines.llamacpp_server import free_port
from flowserve.loadtest.procs import served

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the environment the page installs: its flowserve, python, pytest
KEY = {"authorization": "Bearer sk-local-1"}
RUN = ("Compare policies in simulation", "Serve a workflow", "Put an existing agent behind flowserve",
       "Serve your own workflow", "Run SQL that calls an LLM per row", "Write your own policy")
NOT_RUN = {  # the page's other sections, and where they are checked
    "Install": "the set-up itself: .ci/run and tests/cli/test_first_run.py",
    "The demo": "explains the demo's table (tests/bench)",
    "Serve on a real engine": "tests/examples/test_examples.py serves examples/serve-llama.yaml on llama-server",
    "The examples": "tests/examples/ runs every file",
}
SERVE = "flowserve serve --config examples/serve-sim.yaml --port 8000 &"


def blocks(path: Path) -> dict[str, list[tuple[str, str]]]:
    """Each `## ` section's fenced blocks, as (language, text)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for section in re.split(r"^## ", path.read_text(), flags=re.M)[1:]:
        title, _, body = section.partition("\n")
        out[title.strip()] = re.findall(r"^```(\w+)\n(.*?)^```", body, flags=re.M | re.S)
    return out


SECTIONS = blocks(ROOT / "docs" / "getting-started.md")


def code(section: str, lang: str) -> list[str]:
    return [text for kind, text in SECTIONS[section] if kind == lang]


def lines(section: str) -> list[str]:
    """The section's shell command lines (continuations joined)."""
    joined = "\n".join(code(section, "bash")).replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip()]


class Shell:
    """Runs the page's lines as a newcomer's shell would, from the repository root."""

    def __init__(self, tmp: Path, port: int | None = None, pythonpath: str | None = None) -> None:
        self.tmp, self.port = tmp, port
        self.err = ""  # the last command's standard error (reports, progress)
        self.env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
        if pythonpath:
            self.env["PYTHONPATH"] = pythonpath

    def adapt(self, line: str) -> str:
        """Only what a test must change: the port, fewer queries, output in the test's folder."""
        if self.port is not None:
            line = line.replace("127.0.0.1:8000", f"127.0.0.1:{self.port}")
        line = line.replace(" out/", f" {self.tmp}/out/")
        n = len(list(self.tmp.glob("sim-*.json")))
        line = line.replace("flowserve simulate ", f"flowserve simulate --set workload.queries=6 --slo-scales 4 "
                                                    f"--json {self.tmp}/sim-{n}.json ", 1)
        return line.replace("flowserve bench compare ", f"flowserve bench compare --queries 6 --out {self.tmp}/cmp ", 1)

    def run(self, line: str) -> str:
        done = subprocess.run(["bash", "-c", self.adapt(line)], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
        self.err = done.stderr
        return done.stdout

    def python(self, source: str) -> str:
        done = subprocess.run([str(BIN / "python"), "-c", self.adapt(source)], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout


def simulated(shell: Shell) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(shell.tmp.glob("sim-*.json"))]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The gateway the page starts in the background, on a free port."""
    assert SERVE in lines("Serve a workflow")
    port = free_port()
    args = [str(BIN / "flowserve"), *shlex.split(SERVE.removesuffix("&"))[1:]]
    args[args.index("8000")] = str(port)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the module is found from the root
    with served(args, f"http://127.0.0.1:{port}/health", tmp_path_factory.mktemp("serve") / "serve.log",
                env=env, cwd=ROOT):
        yield port


def test_every_section_of_the_walk_through_is_run_here_or_checked_elsewhere() -> None:
    assert sorted(SECTIONS) == sorted([*RUN, *NOT_RUN])
    for section in RUN:
        assert code(section, "bash") or code(section, "python"), section


def test_a_simulated_policy_comparison(tmp_path: Path) -> None:
    shell = Shell(tmp_path)
    compare, sim, files = lines("Compare policies in simulation")
    table = shell.run(compare)
    rows = [r.split("|")[1].strip() for r in table.splitlines() if r.startswith("| ") and "min SLO" not in r]
    assert rows == ["round_robin", "llmd", "flowserve"]
    assert json.loads((tmp_path / "cmp" / "bench-compare.json").read_text())["cases"]
    shell.run(sim)
    shell.run(files)
    assert [(s["queries"], s["completed"]) for s in simulated(shell)] == [(6, 6), (6, 6)]
    assert (tmp_path / "out" / "flowserve.png").stat().st_size > 10_000


def test_a_served_workflow_and_plain_calls(gateway: int, tmp_path: Path) -> None:
    shell = Shell(tmp_path, gateway)
    started, wait, rag, completion = lines("Serve a workflow")
    assert started == SERVE
    shell.run(wait)
    body = json.loads(shell.run(rag))
    assert body["workflow"] == "naive_rag" and body["status"] == "completed", body
    assert body["output"]["answer"] and {c["node"] for c in body["calls"]} >= {"answer"}
    assert json.loads(shell.run(completion))["usage"]["completion_tokens"] == 16
    [client] = code("Serve a workflow", "python")
    assert shell.python(client).strip()


def program_counters(port: int) -> dict[str, float]:
    """The gateway's program counters: ended, calls sent."""
    out = {"ended": 0.0, "sent": 0.0}
    for family in text_string_to_metric_families(httpx.get(f"http://127.0.0.1:{port}/metrics").text):
        for s in family.samples:
            if s.name == "flowserve_programs_ended_total":
                out["ended"] += s.value
            elif s.name == "flowserve_program_calls_total" and s.labels["outcome"] == "sent":
                out["sent"] += s.value
    return out


def test_an_existing_agent_behind_flowserve(gateway: int, tmp_path: Path) -> None:
    shell = Shell(tmp_path, gateway)
    [snippet] = code("Put an existing agent behind flowserve", "python")
    summary = ast.literal_eval(shell.python(snippet).strip())
    assert summary["calls"] == 2 and summary["failed_calls"] == 0 and summary["deadline_met"] is True
    [agent] = lines("Put an existing agent behind flowserve")
    run = json.loads(shell.run(agent))
    assert run["program"]["calls"] == run["calls"] == 7 and run["program"]["threads"] == [
        "aspect-0", "aspect-1", "aspect-2", "main"]


def test_every_command_the_readme_shows_is_one_of_the_pages() -> None:
    """So the runs above cover the README's quick starts too."""
    page = {line for section in SECTIONS for line in lines(section)}
    readme = "\n".join(re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S))
    shown = [line.strip() for line in readme.replace("\\\n", " ").splitlines() if line.strip()]
    assert len(shown) >= 15
    assert [line for line in shown if line not in page] == []


def test_the_readmes_three_lines_make_one_program(gateway: int, tmp_path: Path) -> None:
    [snippet] = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert len(snippet.strip().splitlines()) == 3 and "my_agent(client)" in snippet
    stand_in = ("def my_agent(client):\n    for text in ('plan', 'act', 'answer'):\n"
                "        client.completions.create(model='llama-3.1-8b', prompt=text, max_tokens=4)\n")
    before = program_counters(gateway)
    Shell(tmp_path, gateway).python(stand_in + snippet)
    after = program_counters(gateway)
    assert (after["ended"] - before["ended"], after["sent"] - before["sent"]) == (1, 3)


def test_the_users_own_workflow_served_and_simulated(gateway: int, tmp_path: Path) -> None:
    [config] = code("Serve your own workflow", "yaml")
    served_config = yaml.safe_load((ROOT / "examples" / "serve-sim.yaml").read_text())
    shown = yaml.safe_load(config)["gateway"]["workflows"]
    assert shown.items() <= served_config["gateway"]["workflows"].items()
    shell = Shell(tmp_path, gateway)
    curl, simulate = lines("Serve your own workflow")
    body = json.loads(shell.run(curl))
    assert body["workflow"] == "digest" and body["status"] == "completed", body
    out = body["output"]
    assert out["sections"] == 3 and out["keywords"] == ["prefix", "caches", "keep", "prompts", "schedulers"]
    assert sorted(c["stage"] for c in body["calls"]) == ["digest", "summary", "summary", "summary"]
    shell.run(simulate)
    [summary] = simulated(shell)
    assert summary["queries"] == summary["completed"] == 6


def test_an_llm_in_sql_statement(tmp_path: Path) -> None:
    shell = Shell(tmp_path)
    q2, sentiment, explain = lines("Run SQL that calls an LLM per row")
    for line in (q2, sentiment):
        assert shell.run(line).strip()
        report = shell.err.strip().splitlines()[-1]
        assert re.search(r"^\d+ rows · \d+ calls · .* · 0 row errors", report), report
    assert "plan" in shell.run(explain).lower()


def test_a_researchers_own_policy(tmp_path: Path) -> None:
    install, tests, compare = lines("Write your own policy")
    assert install == "pip install -e examples/my_policy"
    source = tmp_path / "my_policy"  # a copy: the build leaves nothing in the repository
    shutil.copytree(ROOT / "examples" / "my_policy", source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run([str(BIN / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(tmp_path / "site"), str(source)], check=True, cwd=tmp_path, timeout=300)
    shell = Shell(tmp_path, pythonpath=str(tmp_path / "site"))
    assert re.search(r"\b4 passed\b", shell.run(tests + " -p no:cacheprovider"))
    table = shell.run(compare)
    rows = [r.split("|")[1].strip() for r in table.splitlines() if r.startswith("| ") and "min SLO" not in r]
    assert rows == ["earliest_finish+fcfs", "llmd", "flowserve"]


def port_clashes(commands: list[str]) -> list[str]:
    """Runs the lines as a shell would, keeping only who holds which port: a server
    (`flowserve serve`, llama-server) started with `--port N` holds N, in the background
    (`&`) until `kill %J` ends job J; one started on a held port, or a line that calls a
    port nobody holds, is reported."""
    held: dict[int, int] = {}  # port → job number
    jobs = 0
    problems = []
    for line in commands:
        if m := re.fullmatch(r"kill %(\d+)(\s+#.*)?", line):
            held = {port: job for port, job in held.items() if job != int(m.group(1))}
            continue
        port = re.search(r"--port (\d+)", line)
        if port and ("flowserve serve" in line or "LLAMA_SERVER" in line):
            if int(port.group(1)) in held:
                problems.append(f"port {port.group(1)} is still held: {line}")
            if line.split("#")[0].rstrip().endswith("&"):
                jobs += 1
                held[int(port.group(1))] = jobs
            continue
        problems += [f"nothing listens on {p}: {line}" for p in re.findall(r"127\.0\.0\.1:(\d+)", line)
                     if int(p) not in held]
    return problems


def test_the_quick_starts_in_order_never_start_a_server_on_a_held_port() -> None:
    readme = "\n".join(re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S))
    shown = [line.strip() for line in readme.replace("\\\n", " ").splitlines() if line.strip()]
    assert port_clashes(shown) == []
    page = [line for section in SECTIONS for line in lines(section)]
    assert port_clashes(page) == []
    # the check sees a clash: the real-engine gateway while the simulated one still holds 8000
    assert port_clashes([line for line in shown if not line.startswith("kill %1")])
