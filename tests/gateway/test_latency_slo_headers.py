"""llm-d's per-request SLO headers through the gateway: `x-slo-ttft-ms` and `x-slo-tpot-ms`
become the query's objectives, a bad value is a 400 naming its header, and a sheddable
request no instance would serve in time is refused with 429 before it queues."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from live_support import MODEL

from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.intake.openai_api import APIError
from flowserve.host.intake.tenancy import latency_slo
from flowserve.host.settings import serve_config
from flowserve.types.work import LatencySLO


def test_the_headers_become_the_objectives_in_seconds() -> None:
    assert latency_slo({}) is None
    assert latency_slo({"x-slo-ttft-ms": "250", "x-slo-tpot-ms": "40"}) == LatencySLO(0.25, 0.04)
    assert latency_slo({"x-slo-tpot-ms": "1e2"}) == LatencySLO(None, 0.1)


@pytest.mark.parametrize("value", ["", "abc", "0", "-5", "inf", "nan", "1e400", "2e9"])
@pytest.mark.parametrize("name", ["x-slo-ttft-ms", "x-slo-tpot-ms"])
def test_a_bad_value_is_a_400_naming_its_header(name: str, value: str) -> None:
    with pytest.raises(APIError) as e:
        latency_slo({name: value})
    assert e.value.status == 400 and e.value.param == name and name in str(e.value)


@given(st.dictionaries(st.sampled_from(["x-slo-ttft-ms", "x-slo-tpot-ms", "x-other"]), st.text(max_size=12)))
def test_fuzzed_headers_give_objectives_or_a_400(headers: dict[str, str]) -> None:
    try:
        slo = latency_slo(headers)
    except APIError as e:
        assert e.status == 400 and e.param in ("x-slo-ttft-ms", "x-slo-tpot-ms")
        return
    for name, got in (("x-slo-ttft-ms", None if slo is None else slo.ttft_s),
                      ("x-slo-tpot-ms", None if slo is None else slo.tpot_s)):
        assert (name in headers) == (got is not None)
        if got is not None:
            assert got == pytest.approx(float(headers[name]) / 1000)


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    cfg = serve_config({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}],
                        "gateway": {"time_scale": 200.0, "dispatch": "flowserve_slo",
                                    "dispatch_params": {"model": "analytic"}}}, "test")
    with BackgroundServer(create_app(cfg)) as srv:
        yield srv


def post(srv: BackgroundServer, **headers: str) -> httpx.Response:
    return httpx.post(f"{srv.url}/v1/completions", json={"model": MODEL, "prompt": "one two three " * 50,
                                                         "max_tokens": 4}, headers=headers, timeout=30)


def test_a_sheddable_request_that_cannot_meet_its_ttft_is_refused_and_the_others_served(
        server: BackgroundServer) -> None:
    impossible = {"x-slo-ttft-ms": "0.001", "x-slo-tpot-ms": "1000"}
    refused = post(server, **impossible, **{"x-priority": "-1"})
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "slo_unattainable"
    assert post(server, **impossible).status_code == 200  # not sheddable: queued, and served late
    assert post(server, **{"x-slo-ttft-ms": "60000", "x-priority": "-1"}).status_code == 200


def test_a_bad_header_is_refused_before_the_query_exists(server: BackgroundServer) -> None:
    r = post(server, **{"x-slo-tpot-ms": "fast"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "x-slo-tpot-ms"


def test_objectives_on_batch_work_are_refused_naming_the_header(server: BackgroundServer) -> None:
    r = post(server, **{"x-flowserve-class": "batch", "x-slo-tpot-ms": "50"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "x-slo-tpot-ms"
    assert "batch work" in r.json()["error"]["message"]
    assert post(server, **{"x-flowserve-class": "batch"}).status_code == 200


def test_objectives_on_a_programs_call_are_refused_naming_the_header(server: BackgroundServer) -> None:
    r = post(server, **{"x-flowserve-program": "p1", "x-slo-ttft-ms": "500"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "x-slo-ttft-ms"
    assert post(server, **{"x-flowserve-program": "p1"}).status_code == 200  # nothing of the refused call kept
