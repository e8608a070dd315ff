"""Events about peer replicas: what other schedulers sharing the same engines did, as the
replica sync (`flowserve.replicas`) learned it. Each is a snapshot or a fact with its
own timestamp on this driver's clock; the core folds them into its view (`flowserve.core._peers`).
"""

from __future__ import annotations

from dataclasses import dataclass

from flowserve.types.work import Tokens


@dataclass(frozen=True, slots=True)
class InstanceLoad:
    """One replica's share of an instance's load: calls it has running there, calls
    waiting in its queue for it, and their predicted seconds of work (Hexgen's t_queue)."""

    instance: str
    running: int
    queued: int
    outstanding_s: float


@dataclass(frozen=True, slots=True)
class PeerLoad:
    """A peer replica's latest load on each instance; no loads: it left (or its heartbeat
    expired), so its share is gone."""

    time: float
    replica: str
    loads: tuple[InstanceLoad, ...] = ()


@dataclass(frozen=True, slots=True)
class PeerRouted:
    """A peer replica routed a prompt to `instance`: the prompt's first `tokens` (the
    blocks this replica could rebuild) are now believed cached there."""

    time: float
    instance: str
    tokens: Tokens


@dataclass(frozen=True, slots=True)
class TenantCost:
    """A tenant's service in VTC cost units (prompt and output tokens times their cost
    weights, before the tenant's own weight divides them)."""

    tenant: str
    cost: float


@dataclass(frozen=True, slots=True)
class PeerService:
    """The service a peer replica has served each tenant so far (its totals: a repeated
    report changes nothing)."""

    time: float
    replica: str
    tenants: tuple[TenantCost, ...]


@dataclass(frozen=True, slots=True)
class ProgramShared:
    """A program this replica serves part of: the engine seconds its calls attained at
    the other replicas so far (their total), part of its attained service (Autellix)."""

    time: float
    query_id: int
    service_s: float
