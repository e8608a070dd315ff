"""What the live driver lists of its LLM instances (admin routes, `/v1/models`, health)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flowserve.core.state import InstanceStatus

if TYPE_CHECKING:
    from flowserve.core.scheduler import SchedulerCore
    from flowserve.gateway.calls import CallRunner


class InstanceListing:
    """The driver's instances, those an administrator removed left out."""

    core: SchedulerCore
    runner: CallRunner

    def instances(self) -> list[dict[str, Any]]:
        return [{"name": s.name, "model": s.spec.model, "gpu": s.spec.gpu, "backend": s.spec.backend,
                 "url": s.spec.url, "up": s.up, "circuit": self.runner.circuit_state(s.name), "queued": s.queued,
                 "running": s.running, "outstanding_s": s.outstanding_s, "dispatched": s.dispatched,
                 "completed": s.completed} for s in self._status()]

    def _status(self) -> list[InstanceStatus]:
        return [s for s in self.core.instance_status() if s.name not in self.runner.removed]

    def models(self) -> list[str]:
        return sorted({s.spec.model for s in self._status() if s.up})

    def serves(self, model: str) -> bool:
        return any(s.spec.model.lower() == model.lower() for s in self._status())
