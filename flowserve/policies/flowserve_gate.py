"""The `flowserve` queue's gate: how many calls an engine runs at once, and the formulas
it rests on.

An engine's batching sweet spot (`flowserve.profiles.sweet_spot`) is the batch beyond
which an added call slows the running ones more than it adds throughput. The gate holds
calls at the spot only where that slowdown would hurt someone the queue protects:

* a running call is *fragile* when its deadline fits at the spot's speed but not at the
  bigger batch opening would run (`hurt_by` on Hexgen's urgency). Holding the waiting
  calls costs each of them a whole wait for a slot, while admitting them costs the
  running ones a few percent a step, so the gate opens whenever interactive calls wait —
  to the engine's slots — unless it must *hold*: a fragile call runs, or the engine keeps
  its prefix cache in its slots (llama-server, below). Even then it opens when the waiting
  calls are at risk themselves or the calls arrive faster than the spot serves them
  (`spot_load` ≥ 1: sustained overload, where holding back loses deadlines without bound).
  It closes again as soon as it must hold and nobody waits at risk;
* an engine whose slots are its prefix cache (llama-server: each slot keeps the one prompt
  it last ran, `flowserve.sim.slots`) picks, for a new request, the idle slot whose prompt
  shares most with it. At the spot most slots are idle and the request finds its prefix;
  with every slot running, a request takes the one slot that frees and overwrites the
  prompt it kept. Opening the gate to the slots there turned a 0.75 token hit rate into
  0.27 and the mean latency from ~7 s to ~34 s on `bench live --peer sglang-router` at
  4 slots (issue 41), so on such an engine the gate holds unless overloaded;
* batch work beside interactive calls grows only to the stricter spot at `batch_gain`,
  one batch prefill at a time (`batch_gap`), and has a floor: its weighted share of the
  spot (`entitled_slots`), so it is never starved;
* a tenant over its weighted share of the spot beside a *shielded* call — a deadline-free
  call of a tenant within its share, whose only contract is to be served as if alone —
  is held like batch work: up to the stricter spot, its prefills spaced (`batch_gap` at
  `flood_share`).
"""

from __future__ import annotations

from collections import deque

from flowserve.core.state import CallState, InstanceState
from flowserve.profiles.sweet_spot import SweetSpots


def batch_gap(prefill_s: float, share: float) -> float:
    """Seconds before the next held-back call may start beside protected ones: a prefill
    stalls their decode steps (chunked prefill shares the iterations), so spacing those
    prefills by prefill / share keeps them to at most `share` of the engine's time (1:
    one prefill at a time)."""
    return prefill_s / share


def entitled_slots(weight: float, active_weights: float, spot: int) -> float:
    """A tenant's weighted share of the engine's sweet spot among the tenants with calls
    running or waiting there: spot × w / Σ w (weighted fair queueing's share, in slots)."""
    return spot * weight / active_weights if active_weights > 0 else float(spot)


def hurt_by(urgency: float, t_comp: float, slowdown: float) -> bool:
    """Would a call that fits its deadline budget now (Hexgen's urgency U = t_comp − (t_SLO −
    τ_queued) ≤ 0, Eq. 6) miss it if its compute took `slowdown` times as long:
    U + t_comp·(slowdown − 1) > 0. A call already past its budget is not hurt (it misses
    either way), nor one with room for the slowdown."""
    return urgency <= 0.0 < urgency + t_comp * (slowdown - 1.0)


def spot_load(rate: float, prefill_s: float, steps: float, step_s: float, batch: int) -> float:
    """Utilisation of an engine that runs `batch` calls at `step_s` a decode step, by calls
    arriving at `rate` per second: ρ = λ·c, where a call holds the engine c = P + L·s/b
    seconds — its prefill alone, its share of its L decode steps (Little's law)."""
    return rate * (prefill_s + steps * step_s / batch)


def gate_limit(spot: int, slots: int, waiting: int, hold: bool, pressed: bool, overloaded: bool) -> int:
    """How many interactive calls the engine runs at once (module docstring): its slots while
    calls wait, unless it must `hold` (a fragile call runs, or its slots are its prefix
    cache), the first waiting call is not at risk and the spot carries the arrivals — then,
    and while nobody waits, the spot."""
    if waiting and not (hold and not (pressed or overloaded)):
        return max(spot, slots)
    return spot


def batch_room(limit: int, slots: int, interactive_running: int, interactive_rate: float, holds_cache: bool) -> int:
    """How many calls batch work may run at once: the gate's limit, or — while no interactive
    call runs or arrived here within the rate window, on an engine whose slots are not its
    prefix cache — every slot: batch work alone is judged by its throughput, which a bigger
    batch raises, and nobody's latency is at stake (the spot keeps running calls fast)."""
    if interactive_running or interactive_rate > 0.0 or holds_cache:
        return limit
    return max(limit, slots)


def slot_caches(inst: InstanceState) -> bool:
    """Does the engine keep its prefix cache in its slots, one prompt each (llama-server, as
    its fitted profile says: `FittedCostModel.slot_config`)?"""
    return inst.cost.slot_config is not None


def engine_slots(inst: InstanceState) -> int:
    """The sequences the engine may run at once: its slots, or `max_inflight` if fewer."""
    slots = inst.spec.engine.max_num_seqs
    return min(slots, inst.spec.max_inflight) if inst.spec.max_inflight else slots


def occupancy(inst: InstanceState) -> float:
    """How full the engine is: the larger of its sequence slots and KV memory in use."""
    slots = (len(inst.running) + inst.peer_running) / max(1, engine_slots(inst))  # peer replicas' calls too
    kv = 0.0
    cap = inst.kv_capacity
    if cap and inst.spec.reports_capacity and inst.kv_free < cap:
        kv = 1.0 - max(inst.kv_free, 0) / cap
    return min(1.0, max(slots, kv))


class Gate:
    """One queue's sweet spots and what it measures of the interactive calls waiting: their
    decode steps and prefill seconds, and how fast they arrived over `rate_window_s`."""

    __slots__ = ("_arrivals", "_beside", "_spots", "_sums", "rate_window_s")

    def __init__(self, gain: float, batch_gain: float, rate_window_s: float) -> None:
        if rate_window_s <= 0:
            raise ValueError(f"rate_window_s must be positive, got {rate_window_s}")
        self.rate_window_s = rate_window_s
        self._spots = SweetSpots(gain)  # raises on a gain outside [0, 1]
        self._beside = SweetSpots(batch_gain)
        self._arrivals: deque[float] = deque()
        self._sums = [0.0, 0.0, 0]  # Σ decode steps, Σ prefill s, count of the interactive calls waiting

    def queued(self, cs: CallState, prefill_s: float, now: float) -> None:
        self._arrivals.append(now)
        self._sums[0] += cs.predicted_output
        self._sums[1] += prefill_s
        self._sums[2] += 1

    def left(self, cs: CallState, prefill_s: float) -> None:
        sums = self._sums
        if sums[2] <= 1:  # no float drift across idle periods
            self._sums = [0.0, 0.0, 0]
            return
        sums[0] -= cs.predicted_output
        sums[1] -= prefill_s
        sums[2] -= 1

    def rate(self, now: float) -> float:
        """Interactive calls queued here per second over the last `rate_window_s`."""
        arrivals = self._arrivals
        horizon = now - self.rate_window_s
        while arrivals and arrivals[0] < horizon:
            arrivals.popleft()
        return len(arrivals) / self.rate_window_s

    def spot(self, inst: InstanceState, context: float) -> int:
        return self._spots(inst.cost, context, engine_slots(inst))

    def beside(self, inst: InstanceState, context: float) -> int:
        """The stricter spot at `batch_gain`: its calls' decode steps at most 1/√batch_gain slower."""
        return self._beside(inst.cost, context, engine_slots(inst))

    def overloaded(self, inst: InstanceState, context: float, now: float) -> bool:
        """Do the interactive calls arrive faster than a batch at the spot serves them?"""
        n = max(self._sums[2], 1)
        spot = self.spot(inst, context)
        step = inst.cost.decode_step_time(spot, spot * context)
        return spot_load(self.rate(now), max(self._sums[1], 0.0) / n, self._sums[0] / n, step, spot) >= 1.0

    @staticmethod
    def slowdown(inst: InstanceState, context: float, narrow: int, wide: int) -> float:
        """How much longer a decode step takes in a batch of `wide` calls than of `narrow`."""
        step = inst.cost.decode_step_time
        return step(wide, wide * context) / step(narrow, narrow * context)
