"""Tenants are who their API keys say: the `api_keys` of a serving config, read and checked.

Two forms (docs/operations.md, Security):

```yaml
api_keys: [sk-a, sk-b]                  # each key its own tenant: key-1, key-2 (by position)
api_keys:                               # each key names its tenant ...
  sk-alice: alice
  sk-alice-new: alice                   # (two keys of one tenant: a rotation)
  sk-shop: {tenant: shop, acts_for: [shop/*, partner]}   # ... and the tenants it may act for
```

A request's tenant is its key's; `x-tenant` may name another only among those the key
acts for: a name, or a prefix ending in `*` (a lone `*`: every tenant — an operator's
key). Tenant names are 1 to 128 visible ASCII characters; `other` is reserved (the
metrics' series of the tenants beyond the top N). Keys are compared in constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_NAME = 128
OTHER = "other"  # the per-tenant metrics' series of every tenant beyond the top N
OPEN_TENANT = "default"  # an open gateway's tenant when a request names none


def tenant_name_problem(value: Any) -> str | None:
    """Why `value` is not a tenant name, or None."""
    if not isinstance(value, str):
        return f"expected a string, got {type(value).__name__}"
    if not 1 <= len(value) <= MAX_NAME:
        return f"expected 1 to {MAX_NAME} characters, got {len(value)}"
    if not all("!" <= ch <= "~" for ch in value):
        return "only visible ASCII characters (no spaces or control characters)"
    if value == OTHER:
        return f"{OTHER!r} is reserved (the metrics' series of the tenants beyond the top N)"
    return None


@dataclass(frozen=True, slots=True)
class KeyGrant:
    """What one key may do: act as `tenant`, and for the tenants `acts_for` names."""

    tenant: str
    acts_for: tuple[str, ...] = ()

    def may_act_for(self, tenant: str) -> bool:
        return tenant == self.tenant or any(
            tenant.startswith(p[:-1]) if p.endswith("*") else tenant == p for p in self.acts_for)


@dataclass(frozen=True)
class ApiKeys:
    """The gateway's keys; none: the gateway is open (anyone may name any tenant)."""

    grants: tuple[tuple[str, KeyGrant], ...] = ()
    listed: bool = True  # the plain-list form (its keys are also the default admin keys)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.grants)

    def __bool__(self) -> bool:
        return bool(self.grants)

    def grant(self, token: str) -> KeyGrant | None:
        """The grant of a presented key (every key is compared: no early exit to time)."""
        found = None
        for key, g in self.grants:
            if hmac.compare_digest(token.encode(), key.encode()):
                found = g
        return found


def _key_problem(key: Any) -> str | None:
    if not isinstance(key, str) or not key:
        return "a key must be a non-empty string"
    if not all("!" <= ch <= "~" for ch in key):
        return "a key holds only visible ASCII characters (no spaces or control characters)"
    return None


def _pattern_problem(p: Any) -> str | None:
    if isinstance(p, str) and p.endswith("*"):
        return None if p == "*" else tenant_name_problem(p[:-1])
    return tenant_name_problem(p)


def _grant(value: Any, where: str) -> KeyGrant:
    if isinstance(value, str):
        value = {"tenant": value}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected a tenant name or {{tenant: NAME, acts_for: [...]}}")
    unknown = sorted(str(k) for k in set(value) - {"tenant", "acts_for"})
    if unknown:
        raise ValueError(f"{where}: unknown field {unknown[0]!r} (fields: tenant, acts_for)")
    if "tenant" not in value:
        raise ValueError(f"{where}.tenant: required field is missing")
    if (problem := tenant_name_problem(value["tenant"])) is not None:
        raise ValueError(f"{where}.tenant: {problem}")
    acts = value.get("acts_for", [])
    if not isinstance(acts, list):
        raise ValueError(f"{where}.acts_for: expected a list of tenant names (a trailing * matches a prefix)")
    for i, p in enumerate(acts):
        if (problem := _pattern_problem(p)) is not None:
            raise ValueError(f"{where}.acts_for[{i}]: {problem}")
    return KeyGrant(value["tenant"], tuple(acts))


def api_keys(value: Any) -> ApiKeys:
    """`api_keys` of a serving config: a list (each key its own tenant, `key-N` by its
    position) or a mapping key → tenant | {tenant, acts_for}; a ValueError names the fault
    by the key's position (never the key: it is a secret)."""
    if value is None:
        return ApiKeys()
    if isinstance(value, list):
        for i, key in enumerate(value):
            if (problem := _key_problem(key)) is not None:
                raise ValueError(f"item {i + 1}: {problem}")
        if len(set(value)) < len(value):
            dup = next(i for i, k in enumerate(value) if k in value[:i])
            raise ValueError(f"item {dup + 1}: the same key is listed twice")
        return ApiKeys(tuple((k, KeyGrant(f"key-{i}")) for i, k in enumerate(value, 1)), listed=True)
    if isinstance(value, Mapping):
        grants = []
        for i, (key, grant) in enumerate(value.items()):
            if (problem := _key_problem(key)) is not None:
                raise ValueError(f"key {i + 1}: {problem}")
            grants.append((key, _grant(grant, f"key {i + 1}")))
        return ApiKeys(tuple(grants), listed=False)
    raise ValueError("expected a list of keys or a mapping KEY: TENANT")
