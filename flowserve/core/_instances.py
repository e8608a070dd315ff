"""The core's book of LLM engine instances: each built from its spec with its cost
profile and its own queue policy object; their lifecycle (added, up, taken down with
the calls they held); the admission state engines report; which instances may take a
call; the context limit per model. It owns the read-only `ClusterView` over them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.state import CallState, InstanceState, QueryState, leave_queue, new_instance
from flowserve.core.tenants import TenantLedger
from flowserve.core.view import ClusterView, KVReader
from flowserve.errors import ConfigError
from flowserve.profiles.instance import InstanceProfile
from flowserve.profiles.predictor import OutputPredictor
from flowserve.types.events import InstanceCapacity
from flowserve.types.specs import InstanceSpec

if TYPE_CHECKING:
    from flowserve.core.policy import QueueFactory


class InstanceBook:
    def __init__(self, profile: Callable[[InstanceSpec], InstanceProfile], queues: QueueFactory,
                 tenants: TenantLedger, predictor: OutputPredictor, queries: dict[int, QueryState],
                 prefix_index: PrefixIndex | None, kv: KVReader | None = None) -> None:
        self._profile = profile
        self._queues = queues
        self._tenants = tenants
        self.by_name: dict[str, InstanceState] = {}
        self.view = ClusterView(self.by_name, predictor, queries, prefix_index, tenants.shares, kv)
        self._limits: dict[str | None, int | None] = {}  # max context per model
        self._serving: dict[str | None, list[InstanceState]] = {}  # up instances per model

    def add(self, spec: InstanceSpec) -> InstanceState:
        """A new instance (or a replacement under the same name) with its own queue."""
        if not spec.decodes:
            # roles, links and KV transfer are read and checked, but no driver moves a prefill's KV yet: a
            # prefill-only instance would sit idle, so it is refused rather than silently unused
            raise ConfigError(f"instance {spec.name!r}: role 'prefill' is not scheduled yet (prefill/decode "
                              "disaggregation is configuration only in this version); serve it with role 'both'")
        inst = new_instance(spec, self._profile(spec), self._queues())
        self._tenants.set_weights(inst.queue.tenant_weights)
        inst.queue.bind(self.view)
        self.by_name[spec.name] = inst
        self.view.instance_added(inst)
        self._limits.clear()
        self._serving.clear()
        return inst

    def bring_up(self, spec: InstanceSpec) -> InstanceState:
        """The instance of this spec is up: the known one, else a new one (added, or
        replacing one of another spec under the name, which `take_down` emptied first)."""
        inst = self.by_name.get(spec.name)
        if inst is None or inst.spec != spec:
            inst = self.add(spec)
        inst.bring_up()
        self._serving.clear()
        return inst

    def take_down(self, inst: InstanceState) -> tuple[list[CallState], list[CallState]]:
        """The instance is down: its queued and its running calls leave it (returned, for
        the call book to move elsewhere); nothing of its own is outstanding there any more."""
        running = inst.go_down()
        self._serving.clear()
        queued = list(inst.queue)
        for cs in queued:
            leave_queue(cs, inst, released=False)
        return queued, running

    def peer_share(self, inst: InstanceState, outstanding: float, running: int, queued: int, peers: int) -> bool:
        """Peer replicas' share of the instance's load (`flowserve.core._peers`), part of its
        `outstanding`; True when their running calls moved what it may start."""
        return inst.peer_share(outstanding, running, queued, peers)

    def capacity(self, ev: InstanceCapacity) -> InstanceState | None:
        """Apply what the engine reports it can start now."""
        inst = self.by_name.get(ev.instance)
        if inst is not None:
            inst.capacity(ev.free_seqs, ev.headroom_tokens, ev.kv_free_tokens)
        return inst

    def candidates(self, cs: CallState) -> list[InstanceState]:
        """Every up instance serving the call's model, but those that failed it (unless only
        those are left)."""
        model = cs.node.model
        serving = self._serving.get(model)
        if serving is None:
            serving = self._serving[model] = [i for i in self.by_name.values()
                                              if i.up and i.serves(model)]
        if not cs.excluded:
            return list(serving)
        return [i for i in serving if i.name not in cs.excluded] or list(serving)

    def max_context(self, model: str | None) -> int | None:
        """The smallest context of the instances serving `model` (None: unknown)."""
        if model not in self._limits:
            known = [i.max_context for i in self.by_name.values() if i.serves(model) and i.max_context]
            self._limits[model] = min(known) if known else None
        return self._limits[model]
