"""Issue 22, "Consistent CLI": one set of built-in clusters, serving YAMLs as cluster files,
mappings where the docs show mappings, help without type placeholders or cut sentences."""

from __future__ import annotations

import json

import click
import pytest
import typer
from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.cluster import BUILTIN_CLUSTERS
from flowserve.config import load_cluster
from flowserve.host.settings import load_serve_config
from flowserve.sql.connection import cluster_specs

runner = CliRunner()

SERVING_YAML = """\
instances:
  - {name: sim, gpu: A100-80G, model: llama-3.1-8b, backend: sim, count: 2}
api_keys: [sk-local-1]
gateway:
  dispatch: prefix_affinity
  queue: flowserve
  queue_params: {tenant_weights: {gold: 3, free: 1}}
"""


@pytest.mark.parametrize("name", list(BUILTIN_CLUSTERS))
def test_every_builtin_cluster_loads_for_simulate_and_sql_alike(name: str) -> None:
    specs = load_cluster(name)
    assert [s.name for s in specs] == [s.name for s in BUILTIN_CLUSTERS[name]]
    assert [s.name for s in cluster_specs(name)] == [s.name for s in specs]


def test_simulate_takes_paper_l4_as_sql_does(tmp_path) -> None:
    out = tmp_path / "s.json"
    r = runner.invoke(app, ["simulate", "--cluster", "paper-l4", "--workload", "text2sql", "--slo-scales", "4",
                            "--set", "workload.queries=4", "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["completed"] == 4


def test_simulate_reads_a_serving_yaml_and_says_it_leaves_the_gateway_section_out(tmp_path) -> None:
    path = tmp_path / "serve.yaml"
    path.write_text(SERVING_YAML)
    out = tmp_path / "s.json"
    r = runner.invoke(app, ["simulate", "--cluster", str(path), "--set", "workload.queries=4", "--slo-scales", "4",
                            "--json", str(out)], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "gateway: section is for `flowserve serve`" in r.output
    assert json.loads(out.read_text())["completed"] == 4
    # the same file serves, with the mapping form of the tenant weights
    cfg = load_serve_config(path)
    assert cfg.gateway.queue_params == {"tenant_weights": {"gold": 3, "free": 1}}


def test_a_bad_tenant_weight_in_a_mapping_is_named(tmp_path) -> None:
    path = tmp_path / "serve.yaml"
    path.write_text(SERVING_YAML.replace("gold: 3", "gold: -3"))
    r = runner.invoke(app, ["serve", "--config", str(path)], terminal_width=200)
    assert r.exit_code == 2
    assert "tenant weight 'gold'" in r.output and "positive finite number, got -3" in r.output


def _commands(group: typer.Typer) -> list[list[str]]:
    cmd = typer.main.get_command(group)
    out: list[list[str]] = [[]]

    def walk(c: click.Command, path: list[str]) -> None:
        for name, sub in getattr(c, "commands", {}).items():
            out.append([*path, name])
            walk(sub, [*path, name])
    walk(cmd, [])
    return out


def test_help_has_no_type_placeholders_for_flags_and_no_cut_sentences() -> None:
    paths = _commands(app)
    assert len(paths) > 20
    for path in paths:
        r = runner.invoke(app, [*path, "--help"], terminal_width=80)
        assert r.exit_code == 0, (path, r.output)
        assert "<bool>" not in r.output, path
        if "Commands:" in r.output:
            assert "..." not in r.output.split("Commands:")[1], path
        assert "╭" not in r.output, path  # plain help: no rich panels
    top = runner.invoke(app, ["--help"], terminal_width=80).output
    assert "fit the cost model, write a profile." in " ".join(top.split())
