"""`fits_context`: instances whose model's context window holds the call.

    keep_i = prompt + 1 ≤ context_i          (with_output: prompt + predicted output ≤ context_i)

`context_i`: the instance's context window from its profile (kept when unknown). The core
refuses a prompt longer than the smallest context of the instances serving its model;
this filter matters where windows differ and a call should go where it fits with room
for its answer.
"""

from __future__ import annotations

from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.state import InstanceState
from flowserve.policies.scoring.plugin import Decision, Filter


def fits(prompt_tokens: int, output_tokens: int, context: int | None) -> bool:
    """Whether `prompt_tokens` + `output_tokens` (at least one) fit a context of `context` tokens."""
    return context is None or prompt_tokens + max(output_tokens, 1) <= context


class FitsContext(Filter):
    name = "fits_context"

    def __init__(self, with_output: Annotated[bool, Help("room for the call's predicted output too, not only "
                                                         "its first token")] = False) -> None:
        self.with_output = with_output

    def keep(self, inst: InstanceState, d: Decision) -> bool:
        cs = d.call
        return fits(cs.input_tokens, cs.predicted_output if self.with_output else 1, inst.max_context)
