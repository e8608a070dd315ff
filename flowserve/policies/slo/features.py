"""What the latency predictor sees of a call on an instance at dispatch, and what it learns
from when the call ends.

The features are the instance's state in seconds of its own hardware, through its cost
model (`flowserve.profiles.cost_model`), plus two counts. Stated in seconds of the
instance's GPU, one regression serves every GPU type: a slower GPU shows larger features
rather than a different function of them, which is what lets the predictor work on a
heterogeneous pool (llm-d's predictor takes token counts and utilisations, the same
numbers on every GPU, and so assumes a homogeneous pool).

    prefill_ahead_s  prefill seconds queued before the call, and still owed by the running calls
    busy_s           the running batch's mean remaining call × how full the engine is
    slot_wait_s      the wait for a slot where the queue holds calls beyond its batch limit
    own_prefill_s    the call's own prefill of its uncached tokens
    step_s           one decode step of the batch the call would decode in: the running calls,
                     the queued ones before it and itself, up to the batch limit or the slots
    running          calls running on the instance
    ahead            calls its queue would release before it

TTFT and TPOT, the targets, come from the engine's report of the call (`CallFinished`):
TTFT from the decision to the first token, TPOT the mean gap between output tokens after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.policies.flowserve_gate import occupancy
from flowserve.policies.scoring.scorers.finish import slot_wait
from flowserve.types.events import CallFinished

FEATURES = ("prefill_ahead_s", "busy_s", "slot_wait_s", "own_prefill_s", "step_s", "running", "ahead")


def call_features(cs: CallState, inst: InstanceState, view: ClusterView) -> tuple[float, ...]:
    """The call's features on `inst` now, in the order of `FEATURES`."""
    queue = inst.queue
    ahead = queue.waiting_before(cs)
    n = len(inst.running) + inst.peer_running  # peer replicas' calls share the engine
    limit = queue.batch_limit(inst)
    busy = wait = 0.0
    if n:
        mean_call = max(inst.outstanding - queue.waiting_work_s(), 0.0) / (n + inst.peer_queued)
        busy = mean_call * occupancy(inst)
        if limit is not None:
            wait = slot_wait(n + ahead.calls + 1 - limit, n, mean_call)
    cached = view.cached_tokens(cs, inst)
    own_ctx = cs.input_tokens + cs.predicted_output / 2
    ctx = (queue.running_context(inst) if n else 0.0) + own_ctx
    # the batch it decodes in: the running calls, itself, and the calls released before it up to the limit
    batch = max(n + 1, min(n + ahead.calls + 1, limit or inst.spec.engine.max_num_seqs))
    return (ahead.prefill_s + queue.running_prefill_s(inst, view.now), busy, wait,
            inst.cost.prefill_time(cs.input_tokens - cached, cached),
            inst.cost.decode_step_time(batch, ctx * batch / (n + 1)), float(n), float(ahead.calls))


def analytic_latency(x: tuple[float, ...]) -> tuple[float, float]:
    """The cost model's own (TTFT, TPOT) from the features, before anything is learned: the
    prefill ahead, the slot wait and the call's own prefill; one decode step of its batch."""
    return x[0] + x[2] + x[3], x[4]


@dataclass(frozen=True, slots=True)
class ObservedLatency:
    """A finished call's measured TTFT and TPOT (None where it had no first token, or a
    single output token)."""

    ttft_s: float | None
    tpot_s: float | None


def observed_latency(ev: CallFinished, decided: float) -> ObservedLatency:
    """TTFT from the decision at `decided` to the first token; TPOT the mean time per output
    token after the first, (end − first token) / (output tokens − 1)."""
    if ev.first_token is None:
        return ObservedLatency(None, None)
    tpot = (ev.time - ev.first_token) / (ev.output_tokens - 1) if ev.output_tokens > 1 else None
    return ObservedLatency(max(ev.first_token - decided, 0.0), None if tpot is None else max(tpot, 0.0))
