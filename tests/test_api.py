"""The public Python API (`flowserve.simulate`, `compare`, `serve`) and third-party
policies named by import path: the CLI's numbers, objects accepted for every argument,
and one clear line for a policy that breaks the contract."""

from __future__ import annotations

import json
import re

import openai
import pytest
from typer.testing import CliRunner

import flowserve
from flowserve.cli import app
from flowserve.errors import ConfigError
from flowserve.policies.fcfs import FCFS
from flowserve.policies.hexgen import HexgenWB
from flowserve.types.specs import InstanceSpec

runner = CliRunner()
TINY = {"kind": "text2sql", "trace": "financial", "rate": 0.5, "queries": 12}
SIM_VARYING = ("sim_wall_s", "sim_events", "wall_s", "wall_per_sim_s", "decision_cost")


def without_wall_times(data: object) -> object:
    """Everything but the host's wall-clock figures."""
    if isinstance(data, dict):
        return {k: without_wall_times(v) for k, v in data.items() if k not in SIM_VARYING}
    if isinstance(data, list):
        return [without_wall_times(v) for v in data]
    return data


def test_every_public_name_loads() -> None:
    for name in flowserve.__all__:
        assert getattr(flowserve, name) is not None, name
    with pytest.raises(AttributeError):
        flowserve.not_a_name  # noqa: B018


def test_simulate_from_python_gives_the_cli_numbers(tmp_path) -> None:
    out = tmp_path / "sim.json"
    res = runner.invoke(app, ["simulate", "--cluster", "hetero-1", "--workload", "text2sql", "--dispatch", "flowserve",
                              "--queue", "flowserve", "--slo-scales", "2,4", "--seed", "3",
                              "--set", "workload.queries=12", "--json", str(out)])
    assert res.exit_code == 0, res.output
    cli = json.loads(out.read_text())
    py = flowserve.simulate("hetero-1", "text2sql", "flowserve", "flowserve", slo_scales=(2, 4), seed=3,
                            workload_params={"queries": 12})
    assert without_wall_times(json.loads(json.dumps(py.summary))) == without_wall_times(cli)
    assert py.min_slo_scale == cli["min_slo_scale"] and py["calls"] == cli["calls"]
    assert len(py.queries) == 12 and len(py.calls) == cli["calls"]
    assert set(py.queries.columns) >= {"arrival", "finish", "latency", "met"}


def test_simulate_takes_objects_for_every_argument() -> None:
    specs = (InstanceSpec("a", "A100-80G", "llama-3.1-70b", 8), InstanceSpec("b", "A6000", "llama-3.1-70b", 8))
    by_name = flowserve.simulate({"instances": [{"name": "a", "gpu": "A100-80G", "model": "llama-3.1-70b", "tp": 8},
                                                {"name": "b", "gpu": "A6000", "model": "llama-3.1-70b", "tp": 8}]},
                                 TINY, "hexgen_wb", "urgency", slo_scales=(4,), alpha=0.3)
    by_object = flowserve.simulate(specs, TINY, HexgenWB(alpha=0.3), FCFS, slo_scales=(4,))
    by_class = flowserve.simulate(specs, TINY, HexgenWB, "fcfs", slo_scales=(4,), dispatch_params={"alpha": 0.3})
    assert by_name.policy["dispatch_params"] == {"alpha": 0.3}  # routed to the policy that takes it
    assert by_object.latency_s == by_class.latency_s  # the same policy, given two ways
    assert by_object.policy["dispatch"] == "hexgen_wb" and by_object.policy["queue"] == "fcfs"


def test_simulate_refuses_what_it_cannot_place() -> None:
    with pytest.raises(ConfigError, match=r"'nonsense'.*neither 'hexgen_wb' nor 'fcfs' takes it"):
        flowserve.simulate("hetero-1", TINY, "hexgen_wb", "fcfs", nonsense=1)
    with pytest.raises(ConfigError, match="slo_scales"):
        flowserve.simulate("hetero-1", TINY, slo_scales=(0,))
    with pytest.raises(ConfigError, match="cluster"):
        flowserve.simulate([], TINY)


def test_a_third_party_policy_runs_by_import_path_in_the_cli_and_python(tmp_path) -> None:
    out = tmp_path / "sim.json"
    res = runner.invoke(app, ["simulate", "--workload", "text2sql", "--set", "workload.queries=8",
                              "--dispatch", "thirdparty:FewestCalls", "--queue", "thirdparty:Lifo",
                              "--set", "dispatch.spread=2", "--slo-scales", "4", "--json", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads(out.read_text())
    assert summary["completed"] == 8
    assert summary["policy"]["dispatch"] == "thirdparty:FewestCalls" and summary["policy"]["queue"] == "thirdparty:Lifo"


@pytest.mark.parametrize(("dispatch", "message"), [
    ("thirdparty:NoChoose", "class NoChoose does not implement choose"),
    ("thirdparty:NotAPolicy", "class NotAPolicy does not derive from flowserve.core.policy.DispatchPolicy"),
    ("thirdparty:Lifo", "class Lifo does not derive from flowserve.core.policy.DispatchPolicy"),
    ("thirdparty:Missing", "module 'thirdparty' has no attribute 'Missing'"),
    ("no_such_package.mod:X", "cannot import 'no_such_package.mod'"),
    ("not a policy", "unknown dispatch policy 'not a policy'"),
])
def test_a_policy_that_breaks_the_contract_fails_at_load_with_one_line(dispatch: str, message: str) -> None:
    res = runner.invoke(app, ["simulate", "--dispatch", dispatch, "--set", "workload.queries=2"])
    assert res.exit_code == 2
    assert message in res.output and len(res.output.strip().splitlines()) == 1, res.output


def test_bad_parameters_of_a_third_party_policy_fail_with_the_policy_s_reason() -> None:
    with pytest.raises(ConfigError, match="spread must be ≥ 0"):
        flowserve.simulate("hetero-1", TINY, "thirdparty:FewestCalls", spread=-1)
    with pytest.raises(ConfigError, match="has no parameter 'alpha'"):
        flowserve.simulate("hetero-1", TINY, "thirdparty:FewestCalls", dispatch_params={"alpha": 1})


def test_compare_from_python_gives_the_cli_numbers(tmp_path) -> None:
    args = dict(quick=True, seed=1, queries=6, oracle=False)
    res = runner.invoke(app, ["bench", "compare", "--quick", "--workload", "text2sql", "--policy", "flowserve",
                              "--policy", "thirdparty:FewestCalls", "--queries", "6", "--seed", "1", "--no-oracle",
                              "--out", str(tmp_path / "cli")])
    assert res.exit_code == 0, res.output
    cli = json.loads((tmp_path / "cli" / "bench-compare.json").read_text())
    py = flowserve.compare(["text2sql"], ["flowserve", "thirdparty:FewestCalls"], **args)
    assert without_wall_times(json.loads(json.dumps(py))) == without_wall_times(cli)
    assert set(py["cases"][0]["results"]) == {"flowserve", "thirdparty:FewestCalls+fcfs"}


def test_serve_from_python_with_a_third_party_policy() -> None:
    config = {"instances": [{"name": "sim", "gpu": "A100-80G", "model": "llama-3.1-8b", "count": 2}],
              "api_keys": ["sk-k"], "gateway": {"time_scale": 200.0}}
    with flowserve.serve(config, port=0, dispatch="thirdparty:FewestCalls", background=True) as srv:
        client = openai.OpenAI(base_url=f"{srv.url}/v1", api_key="sk-k", max_retries=0)
        done = client.completions.create(model="llama-3.1-8b", prompt="hello there", max_tokens=4)
        assert done.usage.completion_tokens == 4
        assert type(srv.app.state.gateway.driver.dispatch).__name__ == "FewestCalls"
    with pytest.raises(ConfigError, match="does not implement choose"):
        flowserve.serve(config, dispatch="thirdparty:NoChoose", background=True)


SERVE_CONFIG = {"instances": [{"name": "sim", "gpu": "A100-80G", "model": "llama-3.1-8b"}]}


@pytest.mark.parametrize(("call", "message"), [
    (lambda: flowserve.simulate(123, TINY), "cluster: expected a name, a file, a mapping"),
    (lambda: flowserve.simulate("hetero-1", TINY, dispatch=None), "dispatch: expected a policy name"),
    (lambda: flowserve.simulate("hetero-1", TINY, queue=3.5), "queue: expected a policy name"),
    (lambda: flowserve.simulate("hetero-1", TINY, dispatch_params=[1]), "dispatch_params: expected a mapping"),
    (lambda: flowserve.simulate("hetero-1", TINY, queue_params="x"), "queue_params: expected a mapping"),
    (lambda: flowserve.simulate("hetero-1", TINY, workload_params=[("a", 1)]), "workload_params: expected a mapping"),
    (lambda: flowserve.simulate("hetero-1", TINY, slo_scales="12"), "slo_scales: expected numbers"),
    (lambda: flowserve.simulate("hetero-1", TINY, slo_scales=(1, "2")), "slo_scales: expected numbers"),
    (lambda: flowserve.simulate("hetero-1", TINY, seed="7"), "seed: expected an integer"),
    (lambda: flowserve.simulate("hetero-1", 5), "workload: expected a built-in name"),
    (lambda: flowserve.simulate("hetero-1", None), "workload: expected a built-in name"),
    (lambda: flowserve.simulate("hetero-1", TINY, dispatch=dict), "dispatch policy 'builtins:dict': dict does not"),
    (lambda: flowserve.simulate("hetero-1", TINY, queue=dict), "queue policy 'builtins:dict': dict does not"),
    (lambda: flowserve.compare(policies=[5]), "policies: 5: expected a policy name"),
    (lambda: flowserve.compare(workloads="text2sql"), "workloads: expected a list"),
    (lambda: flowserve.serve(5), "config: expected a YAML path, a mapping or a ServeConfig"),
    (lambda: flowserve.serve(SERVE_CONFIG, port="x", background=True), "port: expected an integer"),
    (lambda: flowserve.serve(SERVE_CONFIG, port=-1, background=True), "port: expected 1 to 65535 (or 0"),
    (lambda: flowserve.serve(SERVE_CONFIG, port=70_000), "--port: expected 1 to 65535"),
    (lambda: flowserve.serve(SERVE_CONFIG, host=5), "host: expected a string"),
    (lambda: flowserve.serve(SERVE_CONFIG, log_level="loud", background=True), "log_level: expected one of"),
    (lambda: flowserve.serve(SERVE_CONFIG, workers=0), "workers: expected a positive integer"),
    (lambda: flowserve.serve(SERVE_CONFIG, workers=2, background=True), "workers: a background server"),
])
def test_the_python_api_refuses_bad_arguments_with_one_clear_line(call, message: str) -> None:
    """Issue 35 items 12 and 13: TypeError, AttributeError, OverflowError, uvicorn's
    KeyError, or the input silently read another way (a string as its characters)."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        call()


def test_compare_checks_its_output_folder_before_running() -> None:
    from rich.console import Console

    console = Console(record=True, width=100)
    with pytest.raises(ConfigError, match="out '/proc/1/x'"):
        flowserve.compare(["text2sql"], ["flowserve"], quick=True, queries=4, oracle=False, out="/proc/1/x",
                          console=console)
    assert console.export_text() == ""  # nothing ran
