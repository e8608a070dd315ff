"""A cost model whose every time is another's times a constant factor."""

from __future__ import annotations

from dataclasses import dataclass

from flowserve.profiles.cost_model import CostModel
from flowserve.profiles.slot_config import SlotConfig


@dataclass(frozen=True)
class ScaledCost:
    """`base` × `factor`: a simulated engine running `1/factor` times faster than the
    hardware it models takes `factor` times the modelled seconds of the driver's clock."""

    base: CostModel
    factor: float

    def iteration_time(self, prefill_tokens: int, prefill_attended: float, decode_seqs: int,
                       decode_context: float) -> float:
        return self.factor * self.base.iteration_time(prefill_tokens, prefill_attended, decode_seqs, decode_context)

    def prefill_time(self, new_tokens: int, cached_tokens: int = 0) -> float:
        return self.factor * self.base.prefill_time(new_tokens, cached_tokens)

    def decode_step_time(self, batch_size: int, total_context: float) -> float:
        return self.factor * self.base.decode_step_time(batch_size, total_context)

    def call_time(self, input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float:
        return self.factor * self.base.call_time(input_tokens, output_tokens, cached_tokens)

    @property
    def request_overhead_s(self) -> float:
        return self.factor * self.base.request_overhead_s

    @property
    def slot_config(self) -> SlotConfig | None:
        return self.base.slot_config
