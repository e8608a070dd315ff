"""State the core keeps per call, op, query and instance.

Only the core mutates it, through the records' own methods (`CallState.bind`,
`InstanceState.start`, ...): policies read it (a call, its candidate instances, the
`ClusterView`), drivers see plain-data snapshots through the core's query API
(`SchedulerCore.instance_status`, ...). Predicted costs use the instance's cost model and
the output predictor, never a simulator's ground truth. A call's status moves only along
the transitions of `flowserve.core.lifecycle`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from flowserve.core.lifecycle import TRANSITIONS, CallStatus, TransitionError
from flowserve.core.records import FinishedCall
from flowserve.graph.nodes import CallEstimate, LLMNode, OpNode
from flowserve.graph.primitives import op_units
from flowserve.graph.prompt import Toks
from flowserve.graph.runtime import QueryRun
from flowserve.profiles.cost_model import CostModel
from flowserve.profiles.stage_priors import StagePriors
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, Query, ToolOp

if TYPE_CHECKING:
    from flowserve.core.tenants import TenantLedger
    from flowserve.profiles.instance import InstanceProfile

HISTORY_LEN = 512
NO_INSTANCES: frozenset[str] = frozenset()  # shared: a set per call would be one more object for the GC
UNLIMITED = 1 << 62


class CallState:
    """One LLM call while the core tracks it, in one `CallStatus` at a time.

    `call` (the request with its token ids) exists once the prompt is tokenized; a call
    waiting in the late-binding pool is only its node, so a query with 10⁵ waiting
    calls holds no token lists. `instance` is where it is bound (queued or in flight).
    """

    __slots__ = ("attempts", "call", "costs", "enqueued", "excluded", "id", "input_tokens", "instance", "node",
                 "predicted_output", "query", "ready", "released", "seq", "status", "t_comp")

    def __init__(self, call_id: int, node: LLMNode, query: QueryState, ready: float, input_tokens: int,
                 predicted_output: int, seq: int) -> None:
        self.id = call_id
        self.node = node
        self.query = query
        self.ready = ready  # when its node became ready
        self.seq = seq  # ready order (pool FIFO)
        self.input_tokens = input_tokens  # estimated until tokenized, then exact
        self.predicted_output = predicted_output
        self.call: LLMCall | None = None
        self.instance: str | None = None
        self.enqueued = ready  # when it entered its instance's queue
        self.released: float | None = None  # when it was sent to the engine
        self.status = CallStatus.READY
        self.t_comp = 0.0  # predicted compute seconds on its instance
        self.costs: dict[tuple, float] = {}  # per (hardware profile, cached tokens)
        self.attempts = 0
        self.excluded: frozenset[str] = NO_INSTANCES  # instances that failed this call (rarely any)

    @property
    def stage(self) -> str:
        return self.node.stage

    def move(self, to: CallStatus) -> None:
        if to not in TRANSITIONS[self.status]:
            raise TransitionError(self.id, self.status, to)
        self.status = to

    def tokenized(self, call: LLMCall) -> None:
        """Its prompt's token ids are known: the request it is."""
        self.input_tokens = call.input_tokens
        self.call = call

    def bind(self, instance: str, now: float, t_comp: float) -> None:
        """Queued at `instance` now, predicted to take `t_comp` seconds there."""
        self.move(CallStatus.QUEUED)
        self.instance = instance
        self.enqueued = now
        self.t_comp = t_comp

    def release(self, now: float) -> None:
        """Sent to its engine now."""
        self.move(CallStatus.RELEASED)
        self.released = now

    def unbind(self) -> None:
        """Back to READY, bound nowhere (its instance failed it, or was lost)."""
        self.move(CallStatus.READY)
        self.released = None
        self.instance = None

    def exclude(self, instance: str) -> None:
        """`instance` failed it (or was lost under it): not chosen for it again, unless only it is left."""
        self.excluded |= {instance}

    def attempt_failed(self) -> int:
        """An engine failed it: its attempts so far."""
        self.attempts += 1
        return self.attempts

    @classmethod
    def of(cls, call: LLMCall, query: QueryState | None = None, ready: float = 0.0) -> CallState:
        """A tokenized call as the core holds it (policy tests and router benchmarks); without
        `query` a hollow one, enough for the call's own lifecycle but not for dispatch (scoring
        profiles read the query's class)."""
        node = LLMNode(call.node, call.stage, (Toks(call.prompt),), call.max_tokens, model=call.model)
        cs = cls(call.id, node, query if query is not None else QueryState.__new__(QueryState), ready,
                 call.input_tokens, call.predicted_output, call.id)
        cs.tokenized(call)
        return cs


class QueryState:
    """One query while it runs.

    What policies may read of it beyond its query and graph: its attained service (engine
    seconds of its finished calls, `service_s`; along the critical path to a step,
    `path_service`: Autellix's PLAS and ATLAS), where its last call ran
    (`last_instance`: its growing context) and the calls it still expects to make.
    """

    __slots__ = ("_path", "_priors", "ended", "failed", "inflight", "last_instance", "progressed", "query", "run",
                 "service_s")

    def __init__(self, query: Query, run: QueryRun, priors: StagePriors | None = None) -> None:
        self.query = query
        self.run = run
        self.inflight: dict[int, CallState] = {}
        self.failed = False
        self.ended = False  # done or failed: it takes nothing more
        # When the workflow last progressed (a node finished; arrival before that):
        # deadline budgets of the remaining calls are re-split from here (Hexgen Eq. 5).
        self.progressed = query.arrival
        self.service_s = 0.0
        self._path: dict[str, float] = {}  # finished step → attained service along its critical path
        self.last_instance: str | None = None
        self._priors = priors

    @property
    def id(self) -> int:
        return self.query.id

    def expected_remaining(self) -> Sequence[CallEstimate]:
        """The calls still to come: the workflow's own estimate, or for one that learns them
        (a program, whose shape only its client knows) what finished ones of its name did."""
        if self.run.workflow.learns_remaining and self._priors is not None:
            return self._priors.expected(self.query.workflow, self.run.calls_by_stage)
        return self.run.workflow.expected_remaining()

    def progress(self, now: float) -> None:
        """A node finished now: the remaining calls' deadline budgets are split from here."""
        self.progressed = now

    def end(self, failed: bool = False) -> None:
        """It takes nothing more (done, or `failed`)."""
        self.ended = True
        self.failed = self.failed or failed

    def ran_on(self, instance: str) -> None:
        """Its latest call finished on `instance` (where its context grows)."""
        self.last_instance = instance

    def attain_elsewhere(self, seconds: float) -> None:
        """Peer replicas ran `seconds` more of its calls (a program shared by replicas)."""
        self.service_s += seconds

    def attain(self, key: str, deps: Sequence[str], seconds: float) -> None:
        """A step finished after `seconds` on an engine (0 for tools)."""
        self.service_s += seconds
        self._path[key] = self.path_service(deps) + seconds

    def path_service(self, deps: Sequence[str]) -> float:
        """Service attained along the critical path to a step with these dependencies
        (ATLAS): the most any of its finished dependencies accumulated."""
        path = self._path
        return max((path.get(d, 0.0) for d in deps), default=0.0)


@dataclass(frozen=True, slots=True)
class Ahead:
    """Waiting calls a queue would release before a given call: how many, Σ t_comp, Σ prefill s."""

    calls: int = 0
    work_s: float = 0.0
    prefill_s: float = 0.0


class InstanceQueue(Protocol):
    """An instance's waiting calls, as its state holds them and dispatch policies read
    them: the queue policy's object (`flowserve.core.policy.QueuePolicy` declares each
    member with its default). `view` is the core's `ClusterView`, which reads this module
    and so is not named here."""

    tenant_weights: Mapping[str, float]

    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[CallState]: ...
    def bind(self, view: Any) -> None: ...
    def push(self, cs: CallState) -> None: ...
    def select(self, inst: InstanceState, view: Any) -> CallState | None: ...
    def remove(self, cs: CallState, released: bool) -> None: ...
    def order_key(self, op: OpState) -> tuple: ...
    def waiting_work_s(self) -> float: ...
    def waiting_prefill_s(self) -> float: ...
    def running_prefill_s(self, inst: InstanceState, now: float) -> float: ...
    def batch_waiting(self) -> int: ...
    def waiting_before(self, cs: CallState) -> Ahead: ...
    def running_context(self, inst: InstanceState) -> float: ...
    def batch_limit(self, inst: InstanceState) -> int | None: ...


class InstanceState:
    """One engine instance as the core sees it."""

    def __init__(self, spec: InstanceSpec, cost: CostModel, queue: InstanceQueue, kv_capacity: int | None = None,
                 max_context: int | None = None) -> None:
        """kv_capacity: KV cache tokens, max_context: the longest sequence (its profile's)."""
        self.spec = spec
        self.name = spec.name
        self.cost = cost
        self.profile = (spec.gpu.lower(), spec.model.lower(), spec.tp, spec.model_spec, spec.profile)
        self.names = spec.served_names()  # the models a request may name to come here (adapters too)
        self.queue = queue
        self.running: dict[int, CallState] = {}
        self.outstanding = 0.0  # Σ predicted t_comp of queued + running calls (peer replicas' included)
        # peer replicas' share of the load (`flowserve.core._peers`): part of `outstanding`
        self.peer_outstanding = 0.0
        self.peer_running = 0
        self.peer_queued = 0
        self.peers = 0  # peer replicas with calls here
        self.up = True
        # Engine-reported admission state (spec.reports_capacity); optimistic otherwise.
        self.free_seqs = spec.engine.max_num_seqs if spec.reports_capacity else UNLIMITED
        self.headroom = spec.engine.token_budget if spec.reports_capacity else UNLIMITED
        self.kv_free = UNLIMITED
        self.kv_capacity = kv_capacity
        self.max_context = max_context
        self.history: deque[FinishedCall] = deque(maxlen=HISTORY_LEN)
        # interactive calls waiting in the queue per tenant: the backlog VTC lifts against
        self.waiting_tenants: dict[str, int] = {}
        self.dispatched = 0
        self.completed = 0

    @property
    def slots_free(self) -> int:
        """Calls this instance can start now: engine admission and max_inflight."""
        free = self.free_seqs
        if self.spec.max_inflight is not None:
            free = min(free, replica_share(self.spec.max_inflight, self) - len(self.running))
        return free

    @property
    def has_room(self) -> bool:
        """Could start a call now, with nothing of its own waiting (late binding binds here)."""
        return self.up and self.slots_free > 0 and self.headroom > 0 and not len(self.queue)

    def serves(self, model: str | None) -> bool:
        return model is None or model.lower() in self.names

    # ------------------------------------------------------------------ what the core's books do to it

    def bound(self, cs: CallState) -> None:
        """A call was dispatched here (queued): its predicted work is outstanding."""
        self.outstanding += cs.t_comp
        self.dispatched += 1

    def add_work(self, seconds: float) -> None:
        self.outstanding += seconds

    def drop_work(self, seconds: float) -> None:
        self.outstanding -= seconds

    def start(self, cs: CallState, need: int) -> None:
        """A queued call starts, needing `need` uncached prompt tokens of the engine's
        budget (counted against what the engine reported, when it reports)."""
        self.running[cs.id] = cs
        if self.spec.reports_capacity:
            self.free_seqs -= 1
            self.headroom -= need
            self.kv_free -= need

    def stop(self, cs: CallState) -> None:
        """A running call left the engine (finished, failed or cancelled)."""
        del self.running[cs.id]
        self.outstanding -= cs.t_comp

    def completed_one(self) -> None:
        self.completed += 1

    def capacity(self, free_seqs: int, headroom: int, kv_free: int) -> None:
        """What the engine reports it can start now."""
        self.free_seqs, self.headroom, self.kv_free = free_seqs, headroom, kv_free

    def bring_up(self) -> None:
        self.up = True

    def go_down(self) -> list[CallState]:
        """The instance is lost: its running calls (returned) leave it, and none of this
        replica's work is outstanding there any more (its queue is emptied by the caller)."""
        self.up = False
        running = list(self.running.values())
        self.running.clear()
        self.outstanding = self.peer_outstanding
        return running

    def peer_share(self, outstanding: float, running: int, queued: int, peers: int) -> bool:
        """Peer replicas' share of the load (`flowserve.core._peers`), part of
        `outstanding`; True when their running calls moved what it may start."""
        self.outstanding += outstanding - self.peer_outstanding
        self.peer_outstanding = outstanding
        self.peer_queued = queued
        if (running, peers) == (self.peer_running, self.peers):
            return False
        self.peer_running, self.peers = running, peers
        return True

    def __repr__(self) -> str:
        return (f"InstanceState({self.name}, queued={len(self.queue)}, "
                f"running={len(self.running)}, outstanding={self.outstanding:.2f}s)")


def replica_share(limit: int, inst: InstanceState) -> int:
    """Of `limit` calls at once on an instance, how many this replica may run beside its
    peers (replicas sharing the engines, `flowserve.core._peers`): what their running calls
    leave, and at least an equal share each, so a stale report starves nobody. Alone: `limit`."""
    return max(limit - inst.peer_running, limit // (inst.peers + 1), 1 if limit > 0 else 0)


def new_instance(spec: InstanceSpec, prof: InstanceProfile, queue: InstanceQueue) -> InstanceState:
    return InstanceState(spec, prof.cost, queue, prof.kv_capacity, prof.max_context)


def join_queue(cs: CallState, inst: InstanceState, tenants: TenantLedger) -> None:
    """The call waits in the instance's queue; an interactive call whose tenant had none
    waiting there lifts that tenant's VTC counter (idle time earns no credit)."""
    if cs.query.query.cls != "batch":
        tenant = cs.query.query.tenant
        waiting = inst.waiting_tenants
        if tenant not in waiting:
            tenants.lift(tenant, waiting)
        waiting[tenant] = waiting.get(tenant, 0) + 1
    inst.queue.push(cs)


def leave_queue(cs: CallState, inst: InstanceState, released: bool) -> None:
    inst.queue.remove(cs, released=released)
    if cs.query.query.cls != "batch":
        tenant = cs.query.query.tenant
        waiting = inst.waiting_tenants
        left = waiting[tenant] - 1
        if left:
            waiting[tenant] = left
        else:
            del waiting[tenant]


class OpState:
    """One batchable op while it waits on (or runs on) a non-LLM engine instance."""

    __slots__ = ("batch", "id", "instance", "node", "op", "query", "seq", "units")

    def __init__(self, op: ToolOp, node: OpNode, query: QueryState, seq: int) -> None:
        self.id = op.id
        self.op = op
        self.node = node
        self.query = query
        self.seq = seq  # ready order
        self.units = op_units(node.args)
        self.instance: str | None = None
        self.batch: int | None = None

    def queued_at(self, instance: str) -> None:
        self.instance = instance
        self.batch = None

    def batched(self, batch: int) -> None:
        self.batch = batch
