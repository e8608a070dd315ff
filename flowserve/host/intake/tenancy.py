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
from flowserve.types.work import QUERY_CLASSES, QueryClass


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


def read_headers(h: Mapping[str, str], keys: ApiKeys) -> Headers:
    """The key's tenant (`request_tenant`), x-priority, x-slo-ms, x-flowserve-class from
    lower-cased request headers."""
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
    return Headers(tenant, priority, slo_s, cls)  # `new_query` drops a batch query's deadline
