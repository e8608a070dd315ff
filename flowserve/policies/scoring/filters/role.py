"""`role`: instances of one role in prefill/decode disaggregation (llm-d's `prefill-filter`
and `decode-filter`).

    keep_i = i's role is `role`, or i serves both, or i declares none

The hook for disaggregated serving: an instance spec that declares a `role` (`prefill`,
`decode` or `both`) is filtered by it. Instance specs declare no role yet, so today the
filter keeps every instance (a no-op); the disaggregation work adds the field and the
profiles that use it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from flowserve.core.params import Help
from flowserve.core.state import InstanceState
from flowserve.policies.scoring.plugin import Decision, Filter

Role = Literal["prefill", "decode"]


def plays(instance_role: str | None, role: str) -> bool:
    """Whether an instance of `instance_role` (None: undeclared) may take work of `role`."""
    return instance_role in (None, "both", role)


class RoleFilter(Filter):
    name = "role"

    def __init__(self, role: Annotated[Role, Help("the role the profile picks instances for")] = "decode") -> None:
        if role not in ("prefill", "decode"):
            raise ValueError(f"role must be 'prefill' or 'decode', got {role!r}")
        self.role: Role = role

    def keep(self, inst: InstanceState, d: Decision) -> bool:
        return plays(getattr(inst.spec, "role", None), self.role)
