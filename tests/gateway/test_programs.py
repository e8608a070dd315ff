"""Programs over the OpenAI API: calls that name a program become one query in the core,
answered call by call, with their deadline, limits, tenants and summary."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
from live_support import MODEL, ScriptedBackend, ext_spec, run

from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import ServeConfig, serve_config

KEY, OTHER_KEY = "sk-program-key", "sk-someone-else"
AUTH = {"authorization": f"Bearer {KEY}"}


def config(**gateway: object) -> ServeConfig:
    return serve_config({
        "instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}],
        "api_keys": {KEY: {"tenant": "team", "acts_for": ["t3"]}, OTHER_KEY: "someone-else"},
        "gateway": {"time_scale": 200.0, "dispatch": "flowserve", "queue": "flowserve", **gateway},
    }, "test")


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    cfg = config(programs={"max_calls": 3, "max_open_per_tenant": 2, "idle_s": 30})
    with BackgroundServer(create_app(cfg)) as srv:
        yield srv


def program_client(server: BackgroundServer, program: str, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0,
                         default_headers={"x-flowserve-program": program, **headers})


def test_calls_of_a_program_are_one_query_and_delete_returns_the_summary(server: BackgroundServer) -> None:
    c = program_client(server, "agent-1", **{"x-slo-ms": "60000"})
    context = "You are a careful agent with tools. " * 40
    first = c.completions.create(model=MODEL, prompt=context + "Plan.", max_tokens=5,
                                 extra_headers={"x-flowserve-stage": "plan"})
    second = c.completions.create(model=MODEL, prompt=context + "Plan." + first.choices[0].text + " Act.",
                                  max_tokens=4, extra_headers={"x-flowserve-stage": "act"})
    assert second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 1  # its context's instance
    state = httpx.get(f"{server.url}/v1/programs/agent-1", headers=AUTH).json()
    assert state["status"] == "open" and state["calls"] == 2 and state["calls_in_flight"] == 0
    assert state["slo_ms"] == 60000
    summary = httpx.delete(f"{server.url}/v1/programs/agent-1", headers=AUTH).json()
    assert summary["status"] == "ended" and summary["ended"] == "deleted"
    assert summary["calls"] == 2 and summary["failed_calls"] == 0
    assert summary["prompt_tokens"] == first.usage.prompt_tokens + second.usage.prompt_tokens
    assert summary["output_tokens"] == 9
    assert summary["cached_tokens"] == second.usage.prompt_tokens_details.cached_tokens + \
        first.usage.prompt_tokens_details.cached_tokens
    assert summary["deadline_met"] is True and 0 < summary["latency_s"] < 60
    assert len(summary["instances"]) == 1
    # a call after DELETE is refused with a clear error, and so is a second DELETE
    with pytest.raises(openai.ConflictError, match="was deleted"):
        c.completions.create(model=MODEL, prompt="more", max_tokens=2)
    again = httpx.delete(f"{server.url}/v1/programs/agent-1", headers=AUTH)
    assert again.status_code == 409 and again.json()["error"]["code"] == "program_ended"
    assert httpx.get(f"{server.url}/v1/programs/agent-1", headers=AUTH).json()["ended"] == "deleted"


def test_bad_program_input_gets_a_clear_4xx(server: BackgroundServer) -> None:
    url = f"{server.url}/v1/completions"
    body = {"model": MODEL, "prompt": "hi", "max_tokens": 2}

    def post(**headers: str) -> httpx.Response:
        return httpx.post(url, json=body, headers={**AUTH, **headers})

    for headers, param in [({"x-flowserve-program": "x" * 129}, "x-flowserve-program"),
                           ({"x-flowserve-program": "has space"}, "x-flowserve-program"),
                           ({"x-flowserve-program": "a/b"}, "x-flowserve-program"),  # issue 35 item 9
                           ({"x-flowserve-program": ".."}, "x-flowserve-program"),
                           ({"x-flowserve-program": "p", "x-flowserve-stage": "s" * 129}, "x-flowserve-stage"),
                           ({"x-flowserve-program": "p", "x-flowserve-thread": ""}, "x-flowserve-thread"),
                           ({"x-flowserve-stage": "plan"}, "x-flowserve-stage"),
                           ({"x-flowserve-program": "p", "x-slo-ms": "inf"}, "x-slo-ms"),
                           ({"x-flowserve-program": "p", "x-slo-ms": "-5"}, "x-slo-ms")]:
        r = post(**headers)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, (headers, r.text)
    assert httpx.get(f"{server.url}/v1/programs/p", headers=AUTH).status_code == 404  # nothing was opened
    assert post(**{"x-flowserve-program": "fixed", "x-slo-ms": "5000"}).status_code == 200
    r = post(**{"x-flowserve-program": "fixed", "x-slo-ms": "9000"})
    assert r.status_code == 400 and "set by its first call" in r.json()["error"]["message"]
    assert post(**{"x-flowserve-program": "fixed"}).status_code == 200  # no header: the program's deadline
    assert post(**{"x-flowserve-program": "fixed"}).status_code == 200
    r = post(**{"x-flowserve-program": "fixed"})  # programs.max_calls is 3 here
    assert r.status_code == 429 and r.json()["error"]["code"] == "program_limit_exceeded"
    assert httpx.get(f"{server.url}/v1/programs/fixed", headers=AUTH).json()["calls"] == 3
    # another tenant can neither use nor see the program: its id names that tenant's own
    other = {"authorization": f"Bearer {OTHER_KEY}"}
    assert httpx.get(f"{server.url}/v1/programs/fixed", headers=other).status_code == 404
    assert httpx.delete(f"{server.url}/v1/programs/fixed", headers=other).status_code == 404
    assert httpx.post(url, json=body, headers={**other, "x-flowserve-program": "fixed"}).status_code == 200
    assert httpx.delete(f"{server.url}/v1/programs/fixed", headers=other).json()["calls"] == 1
    assert httpx.delete(f"{server.url}/v1/programs/fixed", headers=AUTH).json()["calls"] == 3
    # open programs per tenant (2 here)
    t3 = {**AUTH, "x-tenant": "t3"}
    for pid in ("a", "b"):
        assert httpx.post(url, json=body, headers={**t3, "x-flowserve-program": pid}).status_code == 200
    r = httpx.post(url, json=body, headers={**t3, "x-flowserve-program": "c"})
    assert r.status_code == 429 and "max_open_per_tenant" in r.json()["error"]["message"]
    for pid in ("a", "b"):
        httpx.delete(f"{server.url}/v1/programs/{pid}", headers=t3)


def test_idle_programs_end_and_their_summary_stays() -> None:
    cfg = config(programs={"idle_s": 0.2})
    with BackgroundServer(create_app(cfg)) as srv:
        c = program_client(srv, "forgotten")
        c.completions.create(model=MODEL, prompt="one call and gone", max_tokens=2)
        deadline = time.monotonic() + 10
        state = {}
        while time.monotonic() < deadline:  # the sweeper runs every idle_s / 4
            state = httpx.get(f"{srv.url}/v1/programs/forgotten", headers=AUTH).json()
            if state["status"] == "ended":  # "closing" comes first: its last steps may still end
                break
            time.sleep(0.05)
        assert state["status"] == "ended" and state["ended"] == "idle" and state["calls"] == 1
        with pytest.raises(openai.ConflictError, match="without a call"):
            c.completions.create(model=MODEL, prompt="back again", max_tokens=2)
        metrics = httpx.get(f"{srv.url}/metrics").text
        assert 'flowserve_programs_ended_total{how="idle"} 1.0' in metrics
        assert "flowserve_programs_open 0.0" in metrics


def test_a_disconnected_call_is_cancelled_alone_and_the_program_goes_on() -> None:
    async def body() -> None:
        cfg = config(dispatch="round_robin", queue="fcfs")
        cfg = ServeConfig((ext_spec("e1"),), cfg.keys, cfg.gateway)
        engines: dict[str, ScriptedBackend] = {}

        def factory(spec, driver):
            engines[spec.name] = ScriptedBackend(spec)
            return engines[spec.name]

        app = create_app(cfg, backend_factory=factory)
        gw = app.state.gateway
        await gw.start()
        try:
            eng = engines["e1"]
            eng.gate = asyncio.Event()
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as http:
                hdrs = {**AUTH, "x-flowserve-program": "p1"}
                req = {"model": MODEL, "prompt": [1, 2, 3], "max_tokens": 2}
                slow = asyncio.create_task(http.post("/v1/completions", json=req, headers=hdrs))
                await asyncio.wait_for(eng.entered.wait(), 5)
                slow.cancel()  # the client goes away while its call runs
                await asyncio.gather(slow, return_exceptions=True)
                await gw.driver.until(lambda: not gw.driver.core.calls_of(1), 5)  # the core ended the call
                eng.gate.set()
                ok = await http.post("/v1/completions", json={**req, "prompt": [4, 5]}, headers=hdrs)
                assert ok.status_code == 200
                assert eng.cancelled == [eng.calls[0].id]  # the engine was told
                summary = (await http.delete("/v1/programs/p1", headers=AUTH)).json()
                assert summary["calls"] == 2 and summary["failed_calls"] == 1 and summary["status"] == "ended"
        finally:
            await gw.stop()

    run(body())


def test_recorded_programs_replay_in_the_simulator(tmp_path) -> None:
    from flowserve.cluster import BUILTIN_CLUSTERS
    from flowserve.sim.run import PolicySpec, simulate
    from flowserve.workloads import load_workload
    from flowserve.workloads.agent_trace import read_agent_trace

    with BackgroundServer(create_app(config(record=str(tmp_path)))) as srv:
        c = program_client(srv, "rec", **{"x-slo-ms": "30000"})
        ctx = "system prompt of the agent " * 30
        c.completions.create(model=MODEL, prompt=ctx + "plan", max_tokens=3,
                             extra_headers={"x-flowserve-stage": "plan"})
        for t in ("a", "b"):  # two threads, each continuing from the plan
            c.completions.create(model=MODEL, prompt=ctx + f"plan work {t}", max_tokens=2,
                                 extra_headers={"x-flowserve-stage": "work", "x-flowserve-thread": t})
        c.completions.create(model=MODEL, prompt=ctx + "plan join", max_tokens=2,
                             extra_headers={"x-flowserve-stage": "join"})
        single = openai.OpenAI(base_url=f"{srv.url}/v1", api_key=KEY, max_retries=0)
        single.completions.create(model=MODEL, prompt="not a program", max_tokens=2)  # not recorded
        summary = httpx.delete(f"{srv.url}/v1/programs/rec", headers=AUTH).json()
    [path] = tmp_path.glob("trace-*.jsonl")
    trace = read_agent_trace(str(path))
    [q] = trace.traced
    assert q.workflow == "program" and q.deadline_s == 30.0 * 200  # in the engines' time (time_scale 200)
    assert [c.step for c in q.calls] == ["plan", "work", "work", "join"]
    assert [c.thread for c in q.calls] == ["main", "a", "b", "main"]
    assert q.calls[0].after == () and q.calls[1].after == (0,)  # each call follows the one the client saw last
    assert sum(c.output_length for c in q.calls) == summary["output_tokens"] == 9
    assert sum(c.input_length for c in q.calls) == summary["prompt_tokens"]
    shared = [s.id for s in q.calls[0].prompt]
    assert [s.id for s in q.calls[3].prompt][: len(shared) - 1] == shared[:-1]  # the context's blocks are shared
    replay = load_workload(str(path))  # a recorded file is an agent trace, at its recorded arrivals
    assert replay.learned == {"program"}
    res = simulate(BUILTIN_CLUSTERS["preble-a6000"], replay, PolicySpec("flowserve", "flowserve"))
    [out] = res.queries
    assert out.failed is None and len(res.calls) == 4


def test_shutting_down_closes_open_programs_instead_of_waiting_out_the_drain() -> None:
    async def body() -> dict:
        app = create_app(config(drain_timeout_s=30))
        gw = app.state.gateway
        await gw.start()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as http:
            r = await http.post("/v1/completions", json={"model": MODEL, "prompt": [1, 2, 3], "max_tokens": 2},
                                headers={**AUTH, "x-flowserve-program": "left-open"})
            assert r.status_code == 200
        prog = gw.programs.open[("team", "left-open")]
        await asyncio.wait_for(gw.stop(), 10)  # far below the 30 s drain: the program was closed
        return prog.summary

    summary = run(body())
    assert summary["status"] == "ended" and summary["ended"] == "shutdown" and summary["calls"] == 1
