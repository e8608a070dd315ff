"""The policies' parameters as they stand: their constructors' defaults, the
configuration's, then every change a policy announced (`PolicyChanged`, e.g. a tuned α),
which this listener hears as a fact, logs, and keeps for the status page."""

from __future__ import annotations

import inspect
import logging
from collections import deque
from collections.abc import Mapping
from typing import Any

from flowserve.types.commands import PolicyChanged

log = logging.getLogger("flowserve.gateway")
KEPT = 1000  # announced changes kept for reading (the parameters themselves keep every change)


def active_params(cls: type, configured: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """The constructor's defaults, overridden by the configuration, then by the changes the
    policy announced since (e.g. a tuned α), as plain JSON values."""
    params = {n: p.default for n, p in inspect.signature(cls).parameters.items()
              if p.default is not inspect.Parameter.empty}
    params.update(configured)
    params.update(changes)
    return {k: v if isinstance(v, int | float | str | bool | dict | list) or v is None else str(v)
            for k, v in params.items()}


class PolicyParams:
    def __init__(self) -> None:
        self.log: deque[PolicyChanged] = deque(maxlen=KEPT)
        self._changed: dict[str, dict[str, Any]] = {}  # policy name → its parameters it changed, latest value

    def changed(self, cmd: PolicyChanged) -> None:
        """A listener of `PolicyChanged`."""
        log.info("policy %s changed parameters: %s", cmd.policy, dict(cmd.params))
        self.log.append(cmd)
        self._changed.setdefault(cmd.policy, {}).update(cmd.params)

    def active(self, cls: type, configured: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters of the policy class `cls` now (`active_params`)."""
        return active_params(cls, configured, self._changed.get(getattr(cls, "name", ""), {}))
