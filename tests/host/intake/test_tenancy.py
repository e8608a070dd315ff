"""Tenants are who their API keys say (issue 35 items 1, 2, 6, 7): a key acts for its own
tenant and the ones it is granted, programs and queries are the tenant's own, and the
per-tenant metrics keep a bounded set of series."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from live_support import MODEL

from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.intake.openai_api import APIError
from flowserve.host.intake.tenancy import request_tenant
from flowserve.host.settings import ServeConfig, serve_config
from flowserve.tenants import api_keys, tenant_name_problem

ALICE, BOB, SHOP, OPS = "sk-alice-0123456789", "sk-bob-0123456789", "sk-shop-0123456789", "sk-ops-0123456789"
KEYS = {ALICE: "alice", BOB: "bob", SHOP: {"tenant": "shop", "acts_for": ["shop/*", "partner"]}}
SUMMARIZE = {"app": "user_apps:Summarize"}


def auth(key: str, **headers: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}", **headers}


def config(api_keys: object = KEYS, **gateway: object) -> ServeConfig:
    return serve_config({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}],
                         "api_keys": api_keys,
                         "gateway": {"time_scale": 200.0, "workflows": {"summarize": SUMMARIZE},
                                     "programs": {"max_open_per_tenant": 2}, **gateway}}, "test")


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(config(admin_keys=[OPS]))) as srv:
        yield srv


@pytest.fixture(scope="module")
def listed() -> Iterator[BackgroundServer]:
    """A plain list of keys (valid before tenants had names): alice is key-1, bob key-2."""
    with BackgroundServer(create_app(config([ALICE, BOB]))) as srv:
        yield srv


def call(srv: BackgroundServer, headers: dict[str, str], program: str | None = None) -> httpx.Response:
    extra = {"x-flowserve-program": program} if program else {}
    return httpx.post(f"{srv.url}/v1/completions", json={"model": MODEL, "prompt": "one two three", "max_tokens": 2},
                      headers={**headers, **extra}, timeout=30)


def test_a_key_acts_only_for_its_tenant_and_the_tenants_it_is_granted(server: BackgroundServer) -> None:
    """Item 1: with its own key and a forged x-tenant, bob read, joined and ended alice's program."""
    assert call(server, auth(ALICE), "job").status_code == 200
    forged = auth(BOB, **{"x-tenant": "alice"})
    for r in (httpx.get(f"{server.url}/v1/programs/job", headers=forged),
              httpx.delete(f"{server.url}/v1/programs/job", headers=forged), call(server, forged, "job")):
        assert r.status_code == 403, r.text
        assert r.json()["error"]["param"] == "x-tenant" and "x-tenant" in r.json()["error"]["message"]
    # bob's own key: alice's program is not his to see, and his "job" is his own
    assert httpx.get(f"{server.url}/v1/programs/job", headers=auth(BOB)).status_code == 404
    assert httpx.delete(f"{server.url}/v1/programs/job", headers=auth(BOB)).status_code == 404
    assert call(server, auth(BOB), "job").status_code == 200
    assert httpx.get(f"{server.url}/v1/programs/job", headers=auth(ALICE)).json()["calls"] == 1
    assert httpx.get(f"{server.url}/v1/programs/job", headers=auth(BOB)).json()["calls"] == 1
    assert httpx.delete(f"{server.url}/v1/programs/job", headers=auth(ALICE)).json()["calls"] == 1
    assert httpx.delete(f"{server.url}/v1/programs/job", headers=auth(BOB)).json()["calls"] == 1
    # a platform key acts for its granted tenants (a prefix, a name), and for nobody else
    assert call(server, auth(SHOP, **{"x-tenant": "shop/u-17"}), "cart").status_code == 200
    assert call(server, auth(SHOP, **{"x-tenant": "partner"})).status_code == 200
    assert httpx.get(f"{server.url}/v1/programs/cart", headers=auth(SHOP)).status_code == 404  # shop/u-17's
    assert httpx.delete(f"{server.url}/v1/programs/cart", headers=auth(SHOP, **{"x-tenant": "shop/u-17"})
                        ).status_code == 200
    assert call(server, auth(SHOP, **{"x-tenant": "alice"})).status_code == 403
    assert call(server, auth(ALICE, **{"x-tenant": "shop/u-17"})).status_code == 403
    bad = call(server, auth(ALICE, **{"x-tenant": "two words"}))
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "x-tenant"


def test_a_plain_list_of_keys_makes_each_key_its_own_tenant() -> None:
    with BackgroundServer(create_app(config(["sk-first-key", "sk-second-key"]))) as srv:
        assert call(srv, auth("sk-first-key"), "p").status_code == 200
        r = call(srv, auth("sk-second-key", **{"x-tenant": "key-1"}))
        assert r.status_code == 403 and r.json()["error"]["param"] == "x-tenant"
        assert httpx.get(f"{srv.url}/v1/programs/p", headers=auth("sk-second-key")).status_code == 404
        assert httpx.get(f"{srv.url}/v1/programs/p", headers=auth("sk-first-key", **{"x-tenant": "key-1"})
                         ).json()["calls"] == 1
        assert call(srv, auth("sk-first-key")).status_code == 200
        text = httpx.get(f"{srv.url}/metrics").text
        assert 'tenant="key-1"' in text and "sk-first-key" not in text
        # no digest of a key in any series: tenants are named by the configuration
        assert not re.search(r'tenant="key-[0-9a-f]{12}"', text)


def test_queries_are_read_only_by_their_tenant_under_ids_nobody_can_guess(listed: BackgroundServer) -> None:
    """Item 2: any key read any tenant's answers by counting up the query ids."""
    server = listed
    url = f"{server.url}/v1/workflows/summarize"
    ids = []
    for _ in range(2):
        started = httpx.post(url, json={"input": {"document": "a b c d"}, "async": True}, headers=auth(ALICE))
        assert started.status_code == 202
        ids.append(started.json()["id"])
    one = call(server, auth(ALICE))
    ids.append(one.headers["x-flowserve-query-id"])
    assert len(set(ids)) == 3 and all(isinstance(i, str) and len(i) >= 20 for i in ids)
    assert not any(i.isdigit() for i in ids)
    for qid in ids:
        mine = httpx.get(f"{server.url}/v1/queries/{qid}", headers=auth(ALICE))
        assert mine.status_code == 200 and mine.json()["id"] == qid
        theirs = httpx.get(f"{server.url}/v1/queries/{qid}", headers=auth(BOB))
        assert theirs.status_code == 404  # not 403: another tenant's query does not exist for bob
        assert theirs.json()["error"] == {**theirs.json()["error"], "code": "query_not_found"}
    for guess in range(1, 40):  # the core's own sequential ids answer nothing
        assert httpx.get(f"{server.url}/v1/queries/{guess}", headers=auth(ALICE)).status_code == 404


def test_the_open_program_limit_holds_per_authenticated_tenant(listed: BackgroundServer) -> None:
    """Item 6: changing x-tenant opened programs beyond programs.max_open_per_tenant."""
    server = listed
    for pid in ("l1", "l2"):
        assert call(server, auth(BOB), pid).status_code == 200
    assert call(server, auth(BOB), "l3").status_code == 429
    for tenant in ("key-3", "someone", "key-1"):
        assert call(server, auth(BOB, **{"x-tenant": tenant}), "l3").status_code == 403
    for pid in ("l1", "l2"):
        assert httpx.delete(f"{server.url}/v1/programs/{pid}", headers=auth(BOB)).status_code == 200


def test_admin_endpoints_take_admin_keys_only_when_keys_name_tenants(server: BackgroundServer) -> None:
    assert httpx.get(f"{server.url}/status.json", headers=auth(ALICE)).status_code == 401
    assert httpx.get(f"{server.url}/status.json", headers=auth(OPS)).status_code == 200
    with BackgroundServer(create_app(config())) as srv:  # tenants' keys, no admin_keys: nobody is an admin
        r = httpx.get(f"{srv.url}/admin/instances", headers=auth(ALICE))
        assert r.status_code == 403 and "admin_keys" in r.json()["error"]["message"]


def test_per_tenant_metrics_keep_the_top_tenants_and_sum_the_rest() -> None:
    """Item 7: client-invented tenant names grew /metrics and memory without bound."""
    with BackgroundServer(create_app(config([]))) as srv:  # open: any x-tenant; metrics_tenants: 20
        for i in range(60):
            assert call(srv, {"x-tenant": f"invented-{i}"}).status_code == 200
        for _ in range(5):
            assert call(srv, {"x-tenant": "heavy"}).status_code == 200
        httpx.get(f"{srv.url}/metrics")  # a scrape ranks the tenants
        text = httpx.get(f"{srv.url}/metrics").text
        series = re.findall(r'^flowserve_tenant_tokens_total\{kind="output",tenant="([^"]+)"\} (\S+)$', text, re.M)
        tenants = {t for t, _ in series}
        assert len(tenants) <= 21 and "other" in tenants and "heavy" in tenants
        assert sum(float(v) for _, v in series) == 2 * 65  # every output token counted once


names = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=300), max_size=140) | st.sampled_from(
    ["alice", "bob", "shop", "shop/u1", "shop/", "partner", "other", "default", " alice ", "key-1", ""])
BOOKS = [api_keys(KEYS), api_keys([ALICE, BOB]), api_keys(None)]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(range(len(BOOKS))), st.sampled_from([ALICE, BOB, SHOP, OPS, "", "x y"]),
       st.sampled_from(["Bearer ", "bearer  ", "Basic ", ""]), st.none() | names)
def test_any_key_and_x_tenant_give_a_tenant_the_key_may_act_for_or_a_4xx(book: int, key: str, scheme: str,
                                                                          claimed: str | None) -> None:
    keys = BOOKS[book]
    headers = {"authorization": scheme + key, **({} if claimed is None else {"x-tenant": claimed})}
    try:
        tenant = request_tenant(headers, keys)
    except APIError as e:
        assert e.status in (400, 401, 403) and e.message
        if e.status == 403:
            assert e.param == "x-tenant" and keys
        return
    assert tenant_name_problem(tenant) is None or tenant == "default"
    grant = keys.grant(key) if keys else None
    if keys:
        assert grant is not None and scheme.strip().lower() == "bearer" and grant.may_act_for(tenant)
    elif claimed is not None and claimed.strip():
        assert tenant == claimed.strip()  # an open gateway: whatever the client names
