"""The config version replicas must share: their instances and policies.

Replicas of one state decide as one scheduler only if they route to the same instances
with the same policies. The first replica stores a description of its config in the
state (refreshed by heartbeats, so it lapses when the last replica is gone); a replica
whose description differs is refused at start-up, by name: which instances only one side
has or describes otherwise, which policy settings differ.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from flowserve.types.specs import InstanceSpec


def describe(instances: Sequence[InstanceSpec], policy: Mapping[str, Any]) -> dict[str, Any]:
    """The config as plain data: per instance a digest of its whole spec, and the policy
    settings (dispatch, queue, their parameters, passes) as given."""
    return {"instances": {s.name: hashlib.sha256(repr(s).encode()).hexdigest()[:16] for s in instances},
            "policy": {k: policy[k] for k in sorted(policy)}}


def encode(description: Mapping[str, Any]) -> bytes:
    return orjson.dumps(description, option=orjson.OPT_SORT_KEYS)


def differences(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
    """What differs, by name (empty: the same config); both are `describe`'s shape."""
    out: list[str] = []
    a, b = mine["instances"], theirs["instances"]
    for name in sorted(a.keys() | b.keys()):
        if name not in b:
            out.append(f"instance {name!r} only here")
        elif name not in a:
            out.append(f"instance {name!r} only there")
        elif a[name] != b[name]:
            out.append(f"instance {name!r} differs")
    pa, pb = mine["policy"], theirs["policy"]
    for key in sorted(pa.keys() | pb.keys()):
        if pa.get(key) != pb.get(key):
            out.append(f"{key} {_short(pa.get(key))} here, {_short(pb.get(key))} there")
    return out


def _short(value: Any) -> str:
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return text if len(text) <= 40 else text[:37] + "..."
