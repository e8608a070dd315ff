"""Users' own Workflow classes: served at /v1/workflows/NAME, simulated as `kind: app`,
and every configuration mistake refused at start-up with one line."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from live_support import MODEL

from flowserve import workflows as user
from flowserve.errors import ConfigError
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import serve_config
from flowserve.sim.run import PolicySpec, simulate
from flowserve.types.specs import InstanceSpec
from flowserve.workloads import workload_config

CLUSTER = [InstanceSpec("a", "A100-80G", "llama-3.1-8b", 1, reports_capacity=True)]


def config(workflows: dict) -> dict:
    return {"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL}],
            "gateway": {"time_scale": 200.0, "workflows": workflows}}


def test_a_user_workflow_is_served_with_its_configured_arguments_and_tools() -> None:
    cfg = serve_config(config({"brief": {"app": "user_apps:Summarize", "style": "terse"}}), "test")
    with BackgroundServer(create_app(cfg)) as srv:
        listed = httpx.get(f"{srv.url}/v1/workflows").json()["data"]
        assert {"name": "brief", "description": "Summarize a document in two steps: outline, then write."} in listed
        r = httpx.post(f"{srv.url}/v1/workflows/brief", json={"input": {"document": "a long report " * 20,
                                                                          "words": 3}})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "completed" and len(body["output"]["summary"].split()) == 6
        assert body["output"]["looked_up"] == "3 words looked up"  # the class's own tool ran
        assert [c["stage"] for c in body["calls"]] == ["outline", "write"]
        for bad, why in [({"document": "x", "pages": 2}, "pages"), ({"document": "x", "style": "long"}, "style"),
                         ({}, "document"), ({"document": "x", "words": 0}, "words must be positive")]:
            r = httpx.post(f"{srv.url}/v1/workflows/brief", json={"input": bad})
            assert r.status_code == 400 and why in r.json()["error"]["message"], (bad, r.text)
        r = httpx.post(f"{srv.url}/v1/workflows/brief", json={"input": {"document": "x"}, "model": MODEL})
        assert r.status_code == 400 and "chooses its own models" in r.json()["error"]["message"]


@pytest.mark.parametrize("entry, match", [
    ({"app": "no_such_module:App"}, "cannot import 'no_such_module'"),
    ({"app": "user_apps:Missing"}, "has no attribute 'Missing'"),
    ({"app": "user_apps:NotAWorkflow"}, "does not derive from flowserve.graph.workflow.Workflow"),
    ({"app": "user_apps:broken_factory"}, "function does not derive"),
    ({"app": "not a path"}, "expected an import path"),
    ({"app": "user_apps:Summarize", "pages": 3}, "unexpected keyword argument 'pages'"),
    ({"app": 42}, "expected a string"),
])
def test_start_up_refuses_bad_user_workflows_with_one_line(entry, match) -> None:
    with pytest.raises(ConfigError, match=match) as e:
        serve_config(config({"mine": entry}), "serve.yaml")
    assert "\n" not in str(e.value)


def test_a_builtin_name_is_not_taken_by_a_user_app() -> None:
    cfg = serve_config(config({"text2sql": {"app": "user_apps:Summarize"}}), "test")
    with pytest.raises(ConfigError, match="is a built-in workflow"):
        create_app(cfg)


def test_an_installed_entry_point_names_a_workflow(monkeypatch) -> None:
    monkeypatch.setattr(user, "registered", lambda group: {"summarize": "user_apps:Summarize"})
    assert user.workflow_class("summarize").__name__ == "Summarize"
    with pytest.raises(ConfigError, match=r"entry point of flowserve\.workflows"):
        user.workflow_class("unknown")


def test_a_user_workflow_simulates_with_output_lengths_from_priors_or_a_trace(tmp_path) -> None:
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text("\n".join(json.dumps({"document": f"report {i} " * 50}) for i in range(3)) + "\n")
    wl = workload_config({"kind": "app", "app": "user_apps:Summarize", "inputs": str(inputs), "rate": 2.0,
                          "queries": 6, "args": {"words": 64}, "outputs": {"outline": 20},
                          "tools": {"lookup": 0.5}}, "test").build()
    res = simulate(CLUSTER, wl, PolicySpec("flowserve", "flowserve"))
    assert len(res.queries) == 6 and all(q.failed is None for q in res.queries)
    by_stage = {c.stage: c.output_tokens for c in res.calls}
    assert by_stage["outline"] == 20 and by_stage["write"] == 128  # the prior; else max_tokens caps the default
    assert min(q.latency for q in res.queries) > 0.5  # the lookup's half second counts
    trace = tmp_path / "recorded.jsonl"
    trace.write_text(json.dumps({"calls": [{"step": "outline", "input_length": 100, "output_length": 30},
                                           {"step": "write", "input_length": 140, "output_length": 50}]}) + "\n")
    wl = workload_config({"kind": "app", "app": "user_apps:Summarize", "inputs": str(inputs), "rate": 2.0,
                          "trace": str(trace), "args": {"words": 64}}, "test").build()
    res = simulate(CLUSTER, wl, PolicySpec())
    assert {c.stage: c.output_tokens for c in res.calls} == {"outline": 30, "write": 50}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"document": "x", "pages": 1}\n')
    with pytest.raises(ConfigError, match=r"input 1: Summarize: got an unexpected keyword argument 'pages'"):
        workload_config({"kind": "app", "app": "user_apps:Summarize", "inputs": str(bad), "rate": 1.0},
                        "test").build()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200) | st.lists(st.text(max_size=30), max_size=4).map(lambda ls: "\n".join(ls).encode()))
def test_any_inputs_file_reads_as_objects_or_gets_a_config_error(tmp_path, content) -> None:
    from flowserve.workloads.app import read_inputs

    path = tmp_path / "inputs.jsonl"
    path.write_bytes(content)
    try:
        rows = read_inputs(str(path))
    except ConfigError as e:
        assert "\n" not in str(e) and "inputs" in str(e)
    else:
        assert rows and all(isinstance(r, dict) for r in rows)


def test_a_workflow_s_own_bugs_are_its_errors_as_json_and_never_the_engine_s() -> None:
    """Issue 35 item 11: a constructor that raised was a 500 with a closed connection; an
    `output()` that is not JSON was a 500 (and every later GET of an async query too)."""
    cfg = serve_config(config({"faulty": {"app": "user_apps:Faulty"}}), "test")
    with BackgroundServer(create_app(cfg)) as srv, httpx.Client(base_url=srv.url, timeout=60) as http:
        def run(fault: str) -> httpx.Response:
            return http.post("/v1/workflows/faulty", json={"input": {"fault": fault}})

        assert run("none").status_code == 200
        for fault, bug in (("start", "KeyError"), ("output", "ZeroDivisionError: the output's own bug")):
            r = run(fault)  # its own code failed: 500 app_error, not the engine's 502
            assert r.status_code == 500 and r.json()["error"]["code"] == "app_error", r.text
            assert bug in r.json()["error"]["message"] and r.json()["status"] == "failed"
        r = run("init")
        assert r.status_code == 500 and r.headers.get("connection") != "close"
        err = r.json()["error"]
        assert err["code"] == "app_error" and "RuntimeError: the constructor's own bug" in err["message"]
        r = run("not-json")
        assert r.status_code == 500 and r.json()["error"]["code"] == "app_error"
        assert "not JSON" in r.json()["error"]["message"] and r.json()["status"] == "failed"
        started = http.post("/v1/workflows/faulty", json={"input": {"fault": "not-json"}, "async": True})
        url = started.json()["url"]
        gw = srv.app.state.gateway
        asyncio.run_coroutine_threadsafe(gw.driver.until(lambda: not gw.driver.open_queries), gw.driver_loop).result()
        for _ in range(2):  # every later GET answers the same JSON error
            r = http.get(url)
            assert r.status_code == 500 and r.json()["error"]["code"] == "app_error"
        assert run("none").status_code == 200  # the same connection serves on
