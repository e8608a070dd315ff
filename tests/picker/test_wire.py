"""The endpoint picker's ext_proc messages: headers read as the gateway reads them, the pick
sent as GIE's protocol asks (header and `envoy.lb` metadata), refusals as the gateway's JSON."""

from __future__ import annotations

import contextlib

import orjson
import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from hypothesis import given
from hypothesis import strategies as st

from flowserve.errors import ConfigError
from flowserve.host.intake.openai_api import APIError
from flowserve.picker import wire
from flowserve.picker.pick import endpoint_of


def headers(*pairs: tuple[str, str]) -> pb.HttpHeaders:
    return pb.HttpHeaders(headers=base_pb2.HeaderMap(headers=[
        base_pb2.HeaderValue(key=k, raw_value=v.encode()) for k, v in pairs]))


def test_headers_keep_the_first_value_of_a_repeated_name() -> None:
    h = wire.headers_of(headers((":path", "/v1/completions"), ("x-tenant", "a"), ("x-tenant", "b")))
    assert h == {":path": "/v1/completions", "x-tenant": "a"}


def test_a_single_valued_header_sent_twice_is_named() -> None:
    single = frozenset({b"authorization", b"x-tenant"})
    assert wire.repeated(headers((":path", "/v1/completions"), ("x-tenant", "a"), ("x-tenant", "b")), single) \
        == "x-tenant"
    assert wire.repeated(headers(("x-tenant", "a"), ("accept", "x"), ("accept", "y")), single) is None


def test_the_pick_is_a_header_and_envoy_lb_metadata_with_the_same_value() -> None:
    for resp in (wire.routed_body("10.0.0.7:8000", [("x-flowserve-instance", "a")]),
                 wire.routed_headers("10.0.0.7:8000", [])):
        common = resp.request_body.response if resp.HasField("request_body") else resp.request_headers.response
        set_ = {h.header.key: h.header.raw_value.decode() for h in common.header_mutation.set_headers}
        assert set_[wire.DESTINATION] == "10.0.0.7:8000"
        assert resp.dynamic_metadata.fields["envoy.lb"].struct_value.fields[wire.DESTINATION].string_value \
            == "10.0.0.7:8000"
        assert all(h.append_action == base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD
                   for h in common.header_mutation.set_headers)  # a client's own header never survives


def test_a_refusal_is_the_gateways_json_with_its_headers() -> None:
    err = APIError(429, "too busy", "rate_limit_error", "rate_limit_exceeded", headers={"Retry-After": "2"})
    r = wire.immediate(err).immediate_response
    assert r.status.code == 429 and orjson.loads(r.body) == err.body()
    assert {h.header.key: h.header.raw_value for h in r.headers.set_headers}["retry-after"] == b"2"


def test_a_body_goes_back_in_pieces_that_end_once() -> None:
    body = bytes(range(256)) * 600  # 150 KiB
    out = list(wire.streamed_body(True, body, True))
    pieces = [r.request_body.response.body_mutation.streamed_response for r in out]
    assert b"".join(p.body for p in pieces) == body and [p.end_of_stream for p in pieces] == [False, False, True]


def test_the_served_endpoint_is_read_from_the_metadata_context() -> None:
    msg = pb.ProcessingRequest()
    assert wire.served_endpoint(msg) is None
    msg.metadata_context.filter_metadata["envoy.lb"].fields[wire.SERVED].string_value = "10.0.0.8:8000"
    assert wire.served_endpoint(msg) == "10.0.0.8:8000"


def test_endpoints_are_ip_and_port() -> None:
    assert endpoint_of("http://127.0.0.1:8081") == "127.0.0.1:8081"
    assert endpoint_of("http://localhost:9000/v1") in ("127.0.0.1:9000", "[::1]:9000")
    assert endpoint_of("http://[::1]:7000") == "[::1]:7000"
    assert endpoint_of("https://10.1.2.3") == "10.1.2.3:443"
    with pytest.raises(ConfigError):
        endpoint_of("http://no-such-host.invalid:80")


@given(st.text(max_size=40))
def test_any_url_is_an_endpoint_or_a_config_error(url: str) -> None:
    with contextlib.suppress(ConfigError):
        endpoint_of(url)
