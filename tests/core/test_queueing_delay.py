"""The admission wait model: engines batch, so queued work drains at the batch's speedup."""

from __future__ import annotations

import pytest

from flowserve.core.view import batch_speedup, queueing_delay_s


class LinearStep:
    """A decode step of 10 ms plus 1 µs per token of context in the batch."""

    def decode_step_time(self, batch_size: int, total_context: float) -> float:
        return 0.010 + 1e-6 * total_context


def test_batch_speedup_by_hand() -> None:
    cost = LinearStep()
    # b = 4, c = 1000: 4 · (0.010 + 0.001) / (0.010 + 0.004) = 0.044 / 0.014
    assert batch_speedup(cost, 4, 1000) == pytest.approx(0.044 / 0.014)
    assert batch_speedup(cost, 1, 1000) == 1.0
    assert batch_speedup(cost, 0, 1000) == 1.0


def test_queueing_delay_by_hand() -> None:
    # 30 s of serial work drained 3× faster than one after another
    assert queueing_delay_s(30.0, speedup=3.0) == pytest.approx(10.0)
    assert queueing_delay_s(30.0, speedup=0.5) == pytest.approx(30.0)  # never slower than serial
    assert queueing_delay_s(-1.0, speedup=3.0) == 0.0
