"""The clairvoyant bound of `bench programs`: shortest remaining program first (SRPT).

It knows what no scheduler can: every call each program will still make and its true
output length, read from the plan the simulator replays (`PlanWorkflow.plan`). Among the
waiting calls it releases the one whose program has the least remaining engine work —
each unfinished call's prefill of the prompt its predecessor did not hold (its growing
context) plus its decode, on the instance's cost model. SRPT minimises mean response
time on one server (Schrage, "A proof of the optimality of the shortest remaining
processing time discipline", Oper. Res. 1968); without preemption and with tool waits
between calls it is a bound to measure against, not an optimum. A bench contestant
only: in production no queue can read a program's future.
"""

from __future__ import annotations

from collections.abc import Iterator

from flowserve.core.state import CallState, InstanceState, QueryState
from flowserve.core.view import ClusterView
from flowserve.graph.plan import CallStep, DagPlan
from flowserve.graph.replay import PlanWorkflow
from flowserve.policies.base import QueuePolicy
from flowserve.profiles.cost_model import CostModel


def plan_calls(plan: DagPlan) -> list[tuple[str, int, int, int]]:
    """Each call of a program's plan as (key, prompt tokens, output tokens, prompt tokens its
    context already held: the prompt of the call it follows, through tool gaps)."""
    items = {n.key: n for n in plan.nodes}

    def prompt_before(key: str) -> int:
        for dep in items[key].deps:
            item = items[dep].item
            if isinstance(item, CallStep):
                return item.input_tokens
            return prompt_before(dep)  # a tool gap: the call before it
        return 0

    return [(n.key, n.item.input_tokens, n.item.output_tokens, min(prompt_before(n.key), n.item.input_tokens))
            for n in plan.nodes if isinstance(n.item, CallStep)]


def remaining_work(calls: list[tuple[str, int, int, int]], done: dict, cost: CostModel) -> float:
    """Engine seconds of the calls not finished yet (each with its predecessor's prompt cached)."""
    return sum(cost.call_time(n_in, out, held) for key, n_in, out, held in calls if key not in done)


class ProgramSRPT(QueuePolicy):
    """Release the call whose program has the least remaining work (module docstring);
    FCFS among equals and for queries that are not replayed plans."""

    name = "program_srpt"

    def __init__(self) -> None:
        self._q: dict[int, CallState] = {}
        self._calls: dict[int, list[tuple[str, int, int, int]]] = {}  # query id → its plan's calls

    def push(self, cs: CallState) -> None:
        self._q[cs.id] = cs

    def remove(self, cs: CallState, released: bool) -> None:
        del self._q[cs.id]

    def __len__(self) -> int:
        return len(self._q)

    def __iter__(self) -> Iterator[CallState]:
        return iter(self._q.values())

    def remaining(self, qs: QueryState, cost: CostModel) -> float:
        workflow = qs.run.workflow
        if not (isinstance(workflow, PlanWorkflow) and isinstance(workflow.plan, DagPlan)):
            return 0.0
        calls = self._calls.get(qs.id)
        if calls is None:
            calls = self._calls[qs.id] = plan_calls(workflow.plan)
        return remaining_work(calls, qs.run.results, cost)

    def select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        best, best_key = None, None
        for cs in self._q.values():
            key = self.remaining(cs.query, inst.cost)
            if best_key is None or key < best_key:
                best, best_key = cs, key
        return best
