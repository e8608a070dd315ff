"""The bytes replicas keep in Redis: they round-trip, and anything else — foreign keys'
values, wrong types, out-of-range numbers, cut blocks — is a `StateError`, never a crash."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.replicas.blocks import BlockBook, RouteDecoder, RouteEncoder, RouteEntry
from flowserve.replicas.codec import StateError, encode_report, encode_route, parse_report, parse_route
from flowserve.replicas.peers import Report
from flowserve.replicas.programs import Part, parse_program
from flowserve.types.peers import InstanceLoad, TenantCost


def test_reports_round_trip() -> None:
    r = Report("r1", 12.5, (InstanceLoad("a", 2, 3, 1.25),), (TenantCost("gold", 300.0),))
    assert parse_report(encode_report(r), "r1") == r


@pytest.mark.parametrize(("raw", "match"), [
    (None, "missing"), (b"not json", "not JSON"), (b"[1]", "JSON object"), (b'{"v": 2}', "version"),
    (b'{"v": 1, "replica": "r2", "t": 0, "loads": [], "tenants": {}}', "names replica"),
    (b'{"v": 1, "replica": "r1", "t": -1, "loads": [], "tenants": {}}', "finite number"),
    (b'{"v": 1, "replica": "r1", "t": 0, "loads": [["a", -1, 0, 0]], "tenants": {}}', "running"),
    (b'{"v": 1, "replica": "r1", "t": 0, "loads": [["a", 1, 0, "x"]], "tenants": {}}', "seconds"),
    (b'{"v": 1, "replica": "r1", "t": 0, "loads": [["", 1, 0, 0]], "tenants": {}}', "instance"),
    (b'{"v": 1, "replica": "r1", "t": 0, "loads": [], "tenants": {"t": true}}', "cost"),
    (b'{"v": 1, "replica": "r1", "t": 0, "loads": {}, "tenants": {}}', "loads"),
])
def test_bad_reports_are_refused_by_what_is_wrong(raw: bytes | None, match: str) -> None:
    with pytest.raises(StateError, match=match):
        parse_report(raw, "r1")


def test_routes_round_trip_and_rebuild() -> None:
    e = RouteEncoder("r1", BlockBook()).entry("a", tuple(range(40)), now=3.0)
    assert e is not None
    back = parse_route(encode_route(e))
    assert back == e
    assert RouteDecoder(BlockBook()).tokens(back) == tuple(range(40))


def test_bad_routes_are_refused() -> None:
    e = RouteEncoder("r1", BlockBook()).entry("a", tuple(range(40)), now=3.0)
    assert e is not None
    good = encode_route(e)
    for broken in ({**good, b"h": good[b"h"][:-1]}, {**good, b"b": good[b"b"][:-3]}, {**good, b"t": b"nan"},
                   {k: v for k, v in good.items() if k != b"i"}, {**good, b"h": b""}, {**good, b"r": b"\xff"}):
        with pytest.raises(StateError):
            parse_route(broken)
    short_middle = RouteEntry("r1", "a", 1.0, e.hashes, ((0, tuple(range(8))),))  # a short block before the last
    with pytest.raises(StateError, match="does not fit"):
        parse_route(encode_route(short_middle))


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=4), max_leaves=20)
_report_like = st.fixed_dictionaries({"v": st.sampled_from([1, 1, "1", None]), "replica": st.sampled_from(["r1", 3]),
                                      "t": _json, "loads": st.lists(st.lists(_json, max_size=5), max_size=3) | _json,
                                      "tenants": st.dictionaries(st.text(max_size=4), _json, max_size=3) | _json})


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode), _json.map(json.dumps),
                 _report_like.map(json.dumps)))
def test_report_parser_fuzz(raw: bytes | str) -> None:
    try:
        r = parse_report(raw, "r1")
    except StateError:
        return
    assert r.replica == "r1" and all(x.running >= 0 and x.outstanding_s >= 0 for x in r.loads)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([b"r", b"i", b"t", b"h", b"b", b"x"]), st.binary(max_size=120), max_size=6))
def test_route_parser_fuzz(fields: dict[bytes, bytes]) -> None:
    try:
        e = parse_route(fields)
    except StateError:
        return
    try:
        RouteDecoder(BlockBook()).tokens(e)
    except ValueError as err:
        assert "does not hash" in str(err)


def test_program_records_parse_and_sum_their_parts() -> None:
    flat = {b"tenant": b"t", b"ended": b"", b"opened": b"12.5", b"slo_ms": b"", b"priority": b"0",
            b"cls": b"interactive", b"c:r1": b"3", b"p:r1": Part(0, 2, 0, 300, 100, 20, 1.5, 13.0).encode(),
            b"c:r2": b"1", b"i:a": b"1", b"t:main": b"1"}
    rec = parse_program("p", flat)
    assert rec.calls == 4 and rec.parts["r1"].inflight == 1 and rec.parts["r2"].inflight == 1
    assert rec.instances == ("a",) and rec.threads == ("main",) and rec.service_s(without="r2") == 1.5


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([b"tenant", b"ended", b"opened", b"slo_ms", b"priority", b"cls", b"c:r1",
                                        b"p:r1", b"ended_at", b"i:a", b"\xff"]),
                       st.one_of(st.binary(max_size=30), st.sampled_from([b"", b"1", b"-1", b"1e400", b"nan",
                                                                          b"[1,2,3,4,5,6,7]", b"interactive"])),
                       max_size=10))
def test_program_parser_fuzz(flat: dict[bytes, bytes]) -> None:
    try:
        rec = parse_program("p", flat)
    except StateError:
        return
    assert rec.calls >= 0 and all(p.inflight >= 0 for p in rec.parts.values())
