"""A hand-built cluster state for testing a policy against hand-computed examples, with
no driver and no simulator: instances with their queues, queries and calls you build,
and the read-only `ClusterView` a policy gets, at a time you set.

    h = PolicyHarness([instance_a, instance_b], prefix_index=PrefixIndex())
    h.enqueue(call, instance_a)             # as the core queues a call there
    assert MyDispatch().choose(new_call, h.candidates(), h.at(3.0)) is instance_b

It queues calls and charges tenants exactly as the core does (the same functions), so
what a policy reads here is what it reads in the simulator and the gateway. The view is
read-only, as the core's: fill the prefix index through `h.prefix_index`, and set an
instance's or call's state on the objects you built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.core.state import CallState, InstanceState, QueryState, join_queue, leave_queue, new_instance
from flowserve.core.tenants import TenantLedger
from flowserve.core.view import ClusterView
from flowserve.profiles.instance import InstanceProfile, instance_profile
from flowserve.profiles.predictor import OutputPredictor
from flowserve.types.specs import InstanceSpec

if TYPE_CHECKING:
    from flowserve.core.policy import QueuePolicy


class PolicyHarness:
    def __init__(self, instances: Sequence[InstanceState] = (), *, queries: Sequence[QueryState] = (),
                 prefix_index: PrefixIndex | None = None, predictor: OutputPredictor | None = None,
                 now: float = 0.0) -> None:
        self._instances = {i.name: i for i in instances}
        self._queries = {q.id: q for q in queries}
        self.tenants = TenantLedger()
        self.prefix_index = prefix_index  # the live index, to fill by hand (the view only reads it)
        self.view = ClusterView(self._instances, predictor or OutputPredictor(), self._queries, prefix_index,
                                self.tenants.shares)
        self.view.advance(now)
        for inst in instances:
            self.tenants.set_weights(inst.queue.tenant_weights)
            inst.queue.bind(self.view)

    @classmethod
    def for_cluster(cls, specs: Sequence[InstanceSpec], queue: Callable[[], QueuePolicy],
                    profile: Callable[[InstanceSpec], InstanceProfile] = instance_profile,
                    **kw: Any) -> PolicyHarness:
        """Instances as the core builds them from specs (cost model, KV capacity, context)."""
        return cls([new_instance(s, profile(s), queue()) for s in specs], **kw)

    def at(self, now: float) -> ClusterView:
        """The view, its clock moved to `now` (a new decision: index matches are recomputed)."""
        self.view.advance(now)
        self.view.next_decision()
        return self.view

    def candidates(self) -> list[InstanceState]:
        return list(self._instances.values())

    def add_query(self, qs: QueryState) -> None:
        self._queries[qs.id] = qs

    def enqueue(self, cs: CallState, inst: InstanceState) -> None:
        """Queue a call at the instance, as the core does when it binds it there."""
        cs.bind(inst.name, self.view.now, cs.t_comp)
        inst.add_work(cs.t_comp)
        join_queue(cs, inst, self.tenants)

    def release(self, cs: CallState, inst: InstanceState) -> None:
        """Take a queued call off the queue into the instance's running batch."""
        leave_queue(cs, inst, released=True)
        cs.release(self.view.now)
        inst.running[cs.id] = cs

    def serve(self, tenant: str, prompt_tokens: int = 0, output_tokens: int = 0) -> None:
        """Charge a tenant's account as the core does when its calls start and finish."""
        if prompt_tokens:
            self.tenants.started(tenant, prompt_tokens)
        if output_tokens:
            self.tenants.finished(tenant, output_tokens)
