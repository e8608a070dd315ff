"""Who a request is for and what class of work it is: the gateway's tenant and class headers."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass

from flowserve.gateway.openai_api import APIError
from flowserve.types.work import QUERY_CLASSES, QueryClass


def key_tenant(auth: str) -> str | None:
    """The tenant of a bearer API key: a digest of the key, never the key itself."""
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return "key-" + hashlib.sha256(token.strip().encode()).hexdigest()[:12]


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


def read_headers(h: Mapping[str, str]) -> Headers:
    """x-tenant (else the API key's tenant), x-priority, x-slo-ms, x-flowserve-class from
    lower-cased request headers."""
    tenant = h.get("x-tenant", "").strip() or key_tenant(h.get("authorization", "")) or "default"
    if len(tenant) > 128:
        raise APIError(400, "x-tenant: at most 128 characters", param="x-tenant")
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
