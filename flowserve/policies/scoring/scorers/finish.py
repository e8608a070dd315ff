"""`finish`: the call's expected finish on each instance, in seconds (flowserve; Hexgen's
t_queue + t_comp with `wait_model: serial`).

    finish_i = wait_i + slowdown_i + t_comp(call, i)

* `t_comp` — the view's cache-aware compute estimate (Hexgen Eq. 2 on i's hardware, minus
  the prefix the router's index says i caches);
* `wait_i` (`work_ahead`), `wait_model: batched`: prefills go one after the other through
  the engine's token budget while decodes share its batch, so the prefill seconds of the
  calls i's queue releases before this one and those its running calls still owe, plus
  the running batch's mean remaining call weighed by how full the engine is (slots or
  KV), plus the wait for a slot where the queue holds calls beyond what the engine may
  run (`slot_wait`). `serial`: Hexgen's t_queue (Eq. 3), the queued work ahead and the
  running calls' t_comp;
* `slowdown_i` (batched only): the cost model's longer decode steps in i's running batch
  for this call (`batch_slowdown`).

A cost in seconds (`CostScorer`, unit `s`): its score is 1 − finish_i / S, S the largest
seconds cost of the decision, so it adds to the other seconds terms exactly.
"""

from __future__ import annotations

from typing import Annotated, Literal

from flowserve.core.params import Help
from flowserve.core.state import CallState, InstanceState
from flowserve.policies.flowserve_gate import occupancy
from flowserve.policies.scoring.plugin import CostScorer, Decision

WaitModel = Literal["serial", "batched"]


def batch_slowdown(cost, steps: int, own_context: float, running: int, running_context: float) -> float:
    """Extra decode seconds of a call sharing the running batch: steps × (iteration time with
    the batch − alone), the cost model's decode step at batch n + 1 and the summed context."""
    if steps <= 0 or running <= 0:
        return 0.0
    return steps * (cost.decode_step_time(running + 1, running_context + own_context)
                    - cost.decode_step_time(1, own_context))


def slot_wait(excess: int, running: int, mean_call_s: float) -> float:
    """Seconds until a slot frees for a call that finds `excess` calls (itself included)
    beyond what its engine may run: running calls finish one per mean call / running
    seconds in steady state (Little's law), so excess × mean call / running."""
    if excess <= 0 or running <= 0:
        return 0.0
    return excess * mean_call_s / running


def work_ahead(inst: InstanceState, cs: CallState, now: float, wait_model: WaitModel = "batched") -> float:
    """Seconds of work ahead of the call on `inst` (the module docstring's wait_i): what its
    queue releases before it (`waiting_before`: batch work and tenants ahead on their fair
    share go after an interactive call)."""
    queue = inst.queue
    ahead = queue.waiting_before(cs)
    queued = queue.waiting_work_s()
    if wait_model == "serial":
        return max(inst.outstanding - queued + ahead.work_s, 0.0)
    w = ahead.prefill_s + queue.running_prefill_s(inst, now)
    n = len(inst.running) + inst.peer_running  # peer replicas' calls share the engine
    if n:
        mean_call = (inst.outstanding - queued) / (n + inst.peer_queued)
        w += mean_call * occupancy(inst)
        limit = queue.batch_limit(inst)
        if limit is not None:
            w += slot_wait(n + ahead.calls + 1 - limit, n, mean_call)
    return max(w, 0.0)


def call_steps(cs: CallState) -> tuple[int, float]:
    """The call's decode steps after its first token, and its mean context (prompt + half
    its predicted output) while it decodes."""
    return max(cs.predicted_output - 1, 0), cs.input_tokens + cs.predicted_output / 2


def running_batches(d: Decision) -> list[tuple[int, float] | None]:
    """Per candidate, its running batch (calls, Σ context) where calls run, else None."""
    def compute() -> list[tuple[int, float] | None]:
        return [(len(i.running) + i.peer_running, i.queue.running_context(i)) if i.running else None
                for i in d.candidates]
    return d.once("running_batches", compute)


def t_comps(d: Decision) -> list[float]:
    """Per candidate, the view's cache-aware t_comp of the call."""
    return d.once("t_comp", lambda: [d.view.t_comp(d.call, i) for i in d.candidates])


def finishes(d: Decision, wait_model: WaitModel = "batched") -> list[float]:
    """Per candidate, finish_i (the module docstring), computed once per decision."""
    def compute() -> list[float]:
        cs, now = d.call, d.view.now
        steps, own = call_steps(cs)
        batches = running_batches(d) if wait_model == "batched" else [None] * len(d.candidates)
        out = []
        for inst, tc, batch in zip(d.candidates, t_comps(d), batches, strict=True):
            wait = work_ahead(inst, cs, now, wait_model)
            if batch is not None:
                wait += batch_slowdown(inst.cost, steps, own, batch[0], batch[1])
            out.append(wait + tc)
        return out
    return d.once(("finish", wait_model), compute)


class ExpectedFinish(CostScorer):
    name = "finish"
    needs_prefix_index = True  # t_comp counts the prefix the index says each instance caches
    unit = "s"

    def __init__(self, wait_model: Annotated[WaitModel, Help(
            "how the work ahead is counted: `batched` (prefills in turn, decodes sharing the batch, the wait "
            "for a slot) or `serial` (Hexgen's t_queue: every call ahead one after the other)")] = "batched") -> None:
        if wait_model not in ("serial", "batched"):
            raise ValueError(f"wait_model must be 'serial' or 'batched', got {wait_model!r}")
        self.wait_model: WaitModel = wait_model

    def cost(self, d: Decision) -> list[float]:
        return finishes(d, self.wait_model)
