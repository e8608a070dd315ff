"""The policy contract: the base classes every dispatch and queue policy derives from,
and what the core builds instances' queues with (`QueueFactory`). It lives in the core
that calls it; policies (`flowserve.policies`) import it, never the reverse.

A dispatch policy picks an instance for a ready call (global); a queue policy orders
one instance's waiting calls (local). Both only read: the `ClusterView`, the instances
and calls it hands them, and — for a dispatch policy — what a queue declares below
(`waiting_work_s`, ...). Every optional hook is declared here with its default, so the
core calls hooks directly and never probes a policy for attributes. Configuration comes
in through the constructor's parameters (`flowserve.policies.registry` builds policies
by name from config strings); a policy that wants to act on the cluster answers an event
with commands (`observe`), which keeps it free of IO and clocks like the rest of the core.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, Literal, Protocol

from flowserve.core.state import Ahead, CallState, InstanceState, OpState
from flowserve.core.view import ClusterView
from flowserve.types.commands import Command
from flowserve.types.events import Event

Binding = Literal["ready", "late"]
BINDINGS: tuple[Binding, ...] = ("ready", "late")
NO_STATS: Mapping[str, int] = MappingProxyType({})


class DispatchPolicy(ABC):
    """Chooses the instance a ready call runs on.

    Declarations the core reads (class or instance attributes):

    * `uses_deadline`: the policy reads queries' deadlines (the late-binding pool then
      orders by deadline too);
    * `needs_prefix_index`: the core keeps the router's prefix index (`view.prefix_index`);
      `prefix_window_s` is the index's request-history window (None: the default);
    * `binding`: "ready" binds a call to an instance as soon as it is ready (it then waits
      in that instance's queue); "late" keeps it in the core's ready pool until some
      instance has room, and chooses among the instances with room. Every dispatch
      policy also takes `binding` as a config parameter;
    * `tick_s`: drivers send a `Tick` this often when set (policy clocks such as tuning
      windows run on event time only);
    * `shares_prefills`: a call the policy sends to compute a long prefix another instance
      is computing waits for that prefill and is dispatched again (`flowserve.core._leaders`;
      needs the prefix index). The peer routers say False: they dispatch every request at once;
    * `stats`: the policy's own counters, reported by the simulator.
    """

    name: ClassVar[str] = ""
    uses_deadline: ClassVar[bool] = False
    needs_prefix_index: ClassVar[bool] = False
    prefix_window_s: float | None = None
    binding: Binding = "ready"
    tick_s: float | None = None
    shares_prefills: ClassVar[bool] = True
    stats: Mapping[str, int] = NO_STATS

    def bind_when(self, binding: Binding) -> None:
        """The configured `binding` (every dispatch policy takes it, whatever its constructor)."""
        self.binding = binding

    @abstractmethod
    def choose(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView) -> InstanceState:
        """One of `candidates` (never empty) for the call."""

    def attach(self, services: DriverServices) -> None:  # noqa: B027 (an optional hook, empty by default)
        """Called once by the core, before any event, with what its driver offers policies
        (`DriverServices`): a policy takes the services it needs here."""

    def observe(self, event: Event, view: ClusterView) -> Sequence[Command]:
        """Every event the core handles, after the core applied it; commands to issue."""
        return ()


class QueuePolicy(ABC):
    """Orders one instance's waiting calls; the core releases what `select` names when the
    instance can start a call. Each instance gets its own queue object.

    Declarations the core reads: `uses_deadline`, `needs_prefix_index` (as for dispatch),
    `tenant_weights` (the weights of the core's per-tenant service accounts, VTC), and
    `order_key` (the order of the non-LLM ops batched on engine instances).
    """

    name: ClassVar[str] = ""
    uses_deadline: ClassVar[bool] = False
    needs_prefix_index: ClassVar[bool] = False
    tenant_weights: Mapping[str, float] = MappingProxyType({})

    def bind(self, view: ClusterView) -> None:  # noqa: B027 (an optional hook, empty by default)
        """Called once, when the queue is attached to its instance (before any push)."""

    @abstractmethod
    def push(self, cs: CallState) -> None:
        """A call bound to this instance joins the queue."""

    @abstractmethod
    def select(self, inst: InstanceState, view: ClusterView) -> CallState | None:
        """The call to release next (not removed until `remove`); None: hold them all."""

    @abstractmethod
    def remove(self, cs: CallState, released: bool) -> None:
        """The call leaves the queue: released to the engine, or moved or dropped."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def __iter__(self) -> Iterator[CallState]: ...

    @staticmethod
    def order_key(op: OpState) -> tuple:
        """Sort key of the ops waiting on a non-LLM engine instance (default: ready order)."""
        return (op.seq,)

    # ------------------------------------------------------------------ what dispatch may read

    def waiting_work_s(self) -> float:
        """Σ predicted compute seconds (t_comp) of the calls waiting here."""
        return sum(cs.t_comp for cs in self)

    def waiting_prefill_s(self) -> float:
        """Σ prefill seconds of the waiting calls' uncached prompts (default: their whole work)."""
        return self.waiting_work_s()

    def running_prefill_s(self, inst: InstanceState, now: float) -> float:
        """Prefill seconds the instance's running calls still owe (0 when not tracked)."""
        return 0.0

    def batch_waiting(self) -> int:
        """Waiting calls of batch queries (they yield to interactive ones)."""
        return 0

    def waiting_before(self, cs: CallState) -> Ahead:
        """The waiting calls this queue would release before `cs`: count, Σ t_comp, Σ
        prefill seconds (default: all of them)."""
        return Ahead(len(self), self.waiting_work_s(), self.waiting_prefill_s())

    def running_context(self, inst: InstanceState) -> float:
        """Σ context (prompt + half the predicted output) of the calls running on the instance."""
        return sum(c.input_tokens + c.predicted_output / 2 for c in inst.running.values())

    def batch_limit(self, inst: InstanceState) -> int | None:
        """How many calls this queue lets the instance run at once (None: as many as the
        engine admits); a queue that gates releases to the engine's sweet spot says where."""
        return None


class AlphaTuner(Protocol):
    """Online α tuning (Hexgen §4.3; `flowserve.tune.online.OnlineAlphaTuner`)."""

    def observe(self, event: Event, view: ClusterView, policy: Any) -> tuple[Sequence[Command], float | None]:
        """Commands to issue and the α to adopt now (None: keep the current one)."""
        ...


class DriverServices(Protocol):
    """What the driver running a core offers its policies (`DispatchPolicy.attach`):
    services a policy cannot build itself, because they replay traces in the simulator or
    run as the driver's jobs. Both drivers hand the core the same kind
    (`flowserve.tune.online.TuningServices`); more services are more members here."""

    def alpha_tuner(self, window_s: float, p_value: float) -> AlphaTuner:
        """An online α tuner with these windows and test threshold."""
        ...


class QueueFactory(Protocol):
    """Builds one instance's queue per call; `cls` carries the queue policy's declarations,
    which the core reads without building one (`flowserve.policies.queue_factory` makes
    one from a policy's name and parameters)."""

    @property
    def cls(self) -> type[QueuePolicy]: ...

    def __call__(self) -> QueuePolicy: ...
