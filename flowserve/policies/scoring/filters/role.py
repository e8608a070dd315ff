"""`role`: instances of one role in prefill/decode disaggregation (llm-d's `prefill-filter`
and `decode-filter`).

    keep_i = i's role is `role`, or i serves both

An instance's `role` (`prefill`, `decode` or `both`, the default) is its spec's
(`role:` in the cluster YAML). `role: decode` keeps the decode and `both` instances it is
offered; `role: prefill` narrows to the instances that may prefill. Until prefill/decode
disaggregation is scheduled, the core refuses a `prefill` instance, so the filter keeps
every instance a running cluster offers.
"""

from __future__ import annotations

from typing import Annotated, Literal

from flowserve.core.params import Help
from flowserve.core.state import InstanceState
from flowserve.policies.scoring.plugin import Decision, Filter

Role = Literal["prefill", "decode"]


def plays(instance_role: str, role: str) -> bool:
    """Whether an instance of `instance_role` may take work of `role`."""
    return instance_role in ("both", role)


class RoleFilter(Filter):
    name = "role"

    def __init__(self, role: Annotated[Role, Help("the role the profile picks instances for")] = "decode") -> None:
        if role not in ("prefill", "decode"):
            raise ValueError(f"role must be 'prefill' or 'decode', got {role!r}")
        self.role: Role = role

    def keep(self, inst: InstanceState, d: Decision) -> bool:
        return plays(inst.spec.role, self.role)
