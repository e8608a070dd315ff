"""Who a request is for and what class of work it is: the gateway's key, tenant and class
headers.

The tenant is the API key's (`flowserve.tenants`); `x-tenant` names another only among
those the key acts for (else 403 naming the header). Without keys the gateway is open:
`x-tenant` names any tenant, `default` when absent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from flowserve.host.intake.openai_api import APIError
from flowserve.tenants import OPEN_TENANT, ApiKeys, KeyGrant, tenant_name_problem
from flowserve.types.work import QUERY_CLASSES, LatencySLO, QueryClass


def authenticate(auth: str, keys: ApiKeys) -> KeyGrant | None:
    """The grant of the request's bearer key (401 without a right one); None when the
    gateway has no keys."""
    if not keys:
        return None
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise APIError(401, "missing API key: send 'Authorization: Bearer <key>'", code="invalid_api_key")
    grant = keys.grant(token.strip())
    if grant is None:
        raise APIError(401, "incorrect API key provided", code="invalid_api_key")
    return grant


def request_tenant(h: Mapping[str, str], keys: ApiKeys) -> str:
    """The authenticated tenant of a request (401, 403, or 400 for a malformed x-tenant)."""
    grant = authenticate(h.get("authorization", ""), keys)
    claimed = h.get("x-tenant", "").strip()
    if not claimed:
        return OPEN_TENANT if grant is None else grant.tenant
    if (problem := tenant_name_problem(claimed)) is not None:
        raise APIError(400, f"x-tenant: {problem}", param="x-tenant")
    if grant is not None and not grant.may_act_for(claimed):
        raise APIError(403, f"x-tenant: this API key may not act for tenant {claimed!r}",
                       code="tenant_not_allowed", param="x-tenant")
    return claimed


def query_class(value: str | None) -> QueryClass | None:
    """`x-flowserve-class` → "interactive" (also when absent) or "batch"; None if unknown."""
    cls = (value or "interactive").strip().lower() or "interactive"
    return cls if cls in QUERY_CLASSES else None  # type: ignore[return-value]


@dataclass(frozen=True)
class Headers:
    tenant: str
    priority: int
    slo_s: float | None
    cls: QueryClass = "interactive"
    latency_slo: LatencySLO | None = None  # x-slo-ttft-ms, x-slo-tpot-ms


LATENCY_HEADERS = ("x-slo-ttft-ms", "x-slo-tpot-ms")


def latency_slo(h: Mapping[str, str]) -> LatencySLO | None:
    """llm-d's per-request objectives: `x-slo-ttft-ms` (time to the first token) and
    `x-slo-tpot-ms` (mean time per output token after it), positive finite milliseconds
    each (400 naming the header otherwise); None when neither is sent."""
    values: list[float | None] = []
    for name in LATENCY_HEADERS:
        raw = h.get(name)
        if raw is None:
            values.append(None)
            continue
        try:
            ms = float(raw)
        except ValueError:
            ms = -1.0
        if not (math.isfinite(ms) and 0 < ms <= 1e9):
            raise APIError(400, f"{name}: expected a positive finite number of milliseconds, got {raw!r}", param=name)
        values.append(ms / 1000.0)
    return None if values == [None, None] else LatencySLO(*values)


def read_headers(h: Mapping[str, str], keys: ApiKeys) -> Headers:
    """The key's tenant (`request_tenant`), x-priority, x-slo-ms, x-flowserve-class and
    the latency objectives (`latency_slo`) from lower-cased request headers."""
    tenant = request_tenant(h, keys)
    try:
        priority = int(h.get("x-priority", "0"))
    except ValueError:
        raise APIError(400, f"x-priority: expected an integer, got {h.get('x-priority')!r}",
                       param="x-priority") from None
    slo_s = None
    if "x-slo-ms" in h:
        try:
            slo_ms = float(h["x-slo-ms"])
        except ValueError:
            slo_ms = -1.0
        if not (math.isfinite(slo_ms) and slo_ms > 0):  # `inf`, `1e400`: no deadline is not a deadline
            raise APIError(400, f"x-slo-ms: expected a positive finite number of milliseconds, got {h['x-slo-ms']!r}",
                           param="x-slo-ms")
        slo_s = slo_ms / 1000.0
    cls = query_class(h.get("x-flowserve-class"))
    if cls is None:
        raise APIError(400, f"x-flowserve-class: expected one of {list(QUERY_CLASSES)}", param="x-flowserve-class")
    objectives = latency_slo(h)
    if cls == "batch" and objectives is not None:  # batch work has none: refused, never silently dropped
        bad = next(n for n in LATENCY_HEADERS if n in h)
        raise APIError(400, f"{bad}: batch work (x-flowserve-class: batch) has no latency objectives", param=bad)
    return Headers(tenant, priority, slo_s, cls, objectives)  # `new_query` drops a batch query's deadline
