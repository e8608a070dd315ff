"""Hexgen-Text2SQL scheduling (paper §4): workload-balanced dispatch and urgency queues.

`hexgen_wb` sends each ready call to the instance with the highest Eq. 4 score, trading
the instance's queued work (`t_queue`, Eq. 3: Σ predicted t_comp of the calls queued or
running there, removed when they finish or fail) against the call's own predicted
compute time there (`t_comp`, Eq. 2). With `alpha_tuning` on, α is tuned online by
replaying the recorded trace in the simulator (§4.3, `flowserve.tune`).

Its local queue, `urgency` (Eq. 5–7), is `flowserve.policies.urgency`.

β (seconds²) scales the queue term against the compute term; only (1−α)·β/α matters to
the choice. Like the paper, β is fixed by trial: with β = 50 s² the best fixed α on the
default workloads (Hetero-1/2, CHESS traces, 0.5–1 q/s, both engine settings of `bench
hexgen`) lies mid-range, 0.4–0.8, and α = 0.5 is the default. There both terms decide:
for short calls (Δt_comp across GPUs ≈ 0.1–0.3 s) the queue term's spread is of the same
size, so they are balanced by load; long calls (candidates, Δt_comp ≈ 17 s) go to the
fast GPUs unless those are far more loaded. (Balancing the two terms' median spreads
over all decisions instead would give β ≈ 550 s²; its best α is ≈ 0.9, the same
trade-off at the grid's edge, where the tuner resolves it worse.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated

from flowserve.core.params import Help
from flowserve.core.policy import AlphaTuner, DispatchPolicy, DriverServices
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.types.commands import Command
from flowserve.types.events import Event

__all__ = ["DEFAULT_ALPHA", "DEFAULT_BETA", "AlphaTuner", "HexgenWB", "hexgen_score"]

DEFAULT_ALPHA = 0.5


DEFAULT_BETA = 50.0  # s²; see the module docstring and README "Hexgen-Text2SQL"


def hexgen_score(t_queue: float, t_comp: float, alpha: float, beta: float) -> float:
    """Eq. 4: (1−α)·β/t_queue − α·t_comp; an idle instance (t_queue = 0) is best on the queue term."""
    if alpha >= 1.0:
        return -t_comp
    queue_term = math.inf if t_queue <= 0.0 else (1.0 - alpha) * beta / t_queue
    return queue_term - alpha * t_comp


class HexgenWB(DispatchPolicy):
    """Workload-balanced dispatch (Eq. 2–4), optionally with online α tuning (§4.3).

    With alpha_tuning on, α starts at 0 for the first window (`window_s`), then takes
    the value the simulator sweep of that window's trace finds best; a later window
    whose latencies are significantly worse than the previous window's (one-sided Welch
    t-test, p < p_value) triggers a re-tune on that window's trace.
    """

    name = "hexgen_wb"

    def __init__(self, alpha: Annotated[float, Help("Eq. 4's α in [0, 1]: 0 balances by queued work alone, 1 "
                                                    "takes the fastest compute")] = DEFAULT_ALPHA,
                 beta: Annotated[float, Help("Eq. 4's β (s², > 0): scales the queue term against the compute "
                                             "term")] = DEFAULT_BETA,
                 alpha_tuning: Annotated[bool, Help("tune α online by replaying each window's trace in the "
                                                    "simulator (§4.3)")] = False,
                 window_s: Annotated[float, Help("the tuning window, seconds (> 0)")] = 100.0,
                 p_value: Annotated[float, Help("a window re-tunes when its latencies are worse than the last "
                                                "window's at this one-sided Welch t-test p-value, in (0, 1)")]
                 = 0.01) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        if not beta > 0:
            raise ValueError(f"beta must be positive, got {beta}")
        if not window_s > 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        if not 0 < p_value < 1:
            raise ValueError(f"p_value must be in (0, 1), got {p_value}")
        self.alpha = alpha
        self.beta = beta
        self.alpha_tuning = alpha_tuning
        self.window_s = window_s
        self.p_value = p_value
        self.tuner: AlphaTuner | None = None  # the driver's service (`attach`)
        # Benchmarks set a list here to get (stage, chosen, [(instance, t_queue, t_comp)]).
        self.log: list[tuple[str, str, list[tuple[str, float, float]]]] | None = None
        if alpha_tuning:
            self.alpha = 0.0  # §4.3: the first window runs with α = 0 while it is recorded
            self.tick_s = window_s

    def record_to(self, log: list[tuple[str, str, list[tuple[str, float, float]]]]) -> None:
        """Benchmarks: each decision as (stage, chosen, [(instance, t_queue, t_comp)])."""
        self.log = log

    def attach(self, services: DriverServices) -> None:
        """With alpha_tuning on, take the driver's online tuner (it replays traces in the
        simulator, which policies never import)."""
        if self.alpha_tuning and self.tuner is None:
            self.tuner = services.alpha_tuner(self.window_s, self.p_value)

    @staticmethod
    def t_queue(inst: InstanceState) -> float:
        """Eq. 3; exactly 0 when nothing is queued or running (no float residue)."""
        return inst.outstanding if inst.running or len(inst.queue) else 0.0

    def choose(self, cs: CallState, candidates: Sequence[InstanceState],
               view: ClusterView) -> InstanceState:
        alpha, beta = self.alpha, self.beta
        best, best_key = candidates[0], (-math.inf, -math.inf, -math.inf)
        terms = [] if self.log is not None else None
        for inst in candidates:
            tq = self.t_queue(inst)
            tc = view.t_comp(cs, inst)
            # equal scores (idle instances; α = 1 across identical GPUs): faster, then less loaded
            key = (hexgen_score(tq, tc, alpha, beta), -tc, -tq)
            if key > best_key:
                best, best_key = inst, key
            if terms is not None:
                terms.append((inst.name, tq, tc))
        if self.log is not None and terms is not None:
            self.log.append((cs.call.stage, best.name, terms))
        return best

    def observe(self, event: Event, view: ClusterView) -> Sequence[Command]:
        if self.tuner is None:
            assert not self.alpha_tuning, "alpha_tuning is on but no driver attached a tuner"
            return ()
        commands, alpha = self.tuner.observe(event, view, self)
        if alpha is not None:
            self.alpha = alpha
        return commands
