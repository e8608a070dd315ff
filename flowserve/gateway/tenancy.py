"""Who a request is for and what class of work it is: the gateway's tenant and class headers."""

from __future__ import annotations

import hashlib

from flowserve.types import QUERY_CLASSES, QueryClass


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
