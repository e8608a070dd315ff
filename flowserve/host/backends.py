"""The host's engine backends: which backend runs an instance, and the core's cost model
of it in driver seconds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flowserve.engines.backend import Backend
from flowserve.engines.openai_backend import OpenAIBackend
from flowserve.engines.scaled_cost import ScaledCost
from flowserve.engines.simbackend import SimBackend
from flowserve.host.settings import GatewaySettings
from flowserve.profiles.instance import InstanceProfile, instance_profile, kv_capacity, roofline_for
from flowserve.types.events import Event
from flowserve.types.specs import InstanceSpec


@dataclass(frozen=True)
class BackendContext:
    """What a backend factory may use of the host: its settings and clock, what the core
    wants to hear, and `emit` for an engine's own events (capacity, evictions)."""

    settings: GatewaySettings
    clock: Callable[[], float]
    emit: Callable[[Event], None]
    keeps_prefix_index: bool
    wants_prefill_done: bool


BackendFactory = Callable[[InstanceSpec, BackendContext], Backend]  # default: `default_backend`


def live_profile(spec: InstanceSpec, time_scale: float) -> InstanceProfile:
    """The core's cost model of an instance, in driver seconds: a simulated engine runs
    `time_scale` times faster than the hardware it models."""
    prof = instance_profile(spec)
    if spec.backend == "sim" and time_scale != 1.0:
        return InstanceProfile(ScaledCost(prof.cost, 1.0 / time_scale), prof.max_context, prof.kv_capacity)
    return prof


def default_backend(spec: InstanceSpec, host: BackendContext) -> Backend:
    s = host.settings
    if spec.backend == "sim":
        return SimBackend(spec, roofline_for(spec), kv_capacity(spec), s.time_scale, host.emit, host.clock,
                          report_evictions=host.keeps_prefix_index, report_prefill=host.wants_prefill_done)
    return OpenAIBackend(spec, s)
