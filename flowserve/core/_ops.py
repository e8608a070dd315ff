"""The core's book of non-LLM engine instances: batchable ops queued and batched like calls.

A batchable op whose component has instances (`flowserve.graph.primitives.OP_KINDS`)
is bound to the instance of its kind with the least queued work and waits in its queue;
when the instance has a free batch slot (`OpProfile.concurrency`) the core releases a
batch — ops of any queries, in the queue policy's order, up to `max_units` units (an
op larger than that runs alone) and `max_ops` ops — as one `RunBatch`. The driver
answers each op with its `OpFinished`; the slot frees when the whole batch finished.

Order: `topology` keys each op by (its query's arrival, −depth to the graph's output,
ready order), Teola Alg. 2; any other queue policy serves ops FCFS (ops have no
deadlines or prompts for `urgency` / `prefix_groups` to read).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Protocol

from flowserve.core.outbox import Outbox
from flowserve.core.state import OpState, QueryState
from flowserve.errors import FailureKind
from flowserve.graph.nodes import OpNode
from flowserve.graph.primitives import OP_KINDS
from flowserve.profiles.ops import OpProfile, op_profile
from flowserve.types.commands import Command, RunBatch
from flowserve.types.events import OpFinished
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import ToolOp


class QueryEnds(Protocol):
    """Who fails a query whose op cannot run (the run book)."""

    def fail(self, qs: QueryState, reason: str, kind: FailureKind) -> list[Command]: ...


class OpInstance:
    def __init__(self, spec: InstanceSpec, profile: OpProfile) -> None:
        self.spec = spec
        self.name = spec.name
        self.profile = profile
        self.queue: dict[int, OpState] = {}
        self.batches: dict[int, set[int]] = {}  # running batch → its unfinished op ids
        self.queued_units = 0
        self.up = True
        self.dispatched = 0
        self.completed = 0

    def enqueue(self, st: OpState) -> None:
        st.queued_at(self.name)
        self.queue[st.id] = st
        self.queued_units += st.units
        self.dispatched += 1

    def unqueue(self, st: OpState) -> None:
        del self.queue[st.id]
        self.queued_units -= st.units

    def start_batch(self, batch: int, ops: list[OpState]) -> None:
        """These queued ops run now as one batch."""
        for st in ops:
            del self.queue[st.id]
            st.batched(batch)
        self.queued_units -= sum(st.units for st in ops)
        self.batches[batch] = {st.id for st in ops}

    def completed_one(self) -> None:
        self.completed += 1

    def bring_up(self) -> None:
        self.up = True

    def go_down(self) -> list[OpState]:
        """Lost: its queued ops (returned, with the ids of its running batches' ops) leave it."""
        self.up = False
        queued = list(self.queue.values())
        self.queue.clear()
        self.queued_units = 0
        return queued


OrderKey = Callable[[OpState], tuple]


class OpBook:
    """Each method that may cause commands answers with them, in the order they were made."""

    def __init__(self, ends: QueryEnds, order_key: OrderKey, instances: Sequence[InstanceSpec] = ()) -> None:
        self._ends = ends
        self._order = order_key
        self.instances: dict[str, OpInstance] = {}
        self.ops: dict[int, OpState] = {}
        self._seq = itertools.count()
        self._batches = itertools.count(1)
        self._dirty: dict[str, None] = {}
        self._out = Outbox()
        for spec in instances:
            self.add_instance(spec)

    # ------------------------------------------------------------------ instances

    def add_instance(self, spec: InstanceSpec) -> None:
        self.instances[spec.name] = OpInstance(spec, spec.op_profile or op_profile(spec.kind))
        self._dirty[spec.name] = None

    def kinds(self) -> set[str]:
        return {i.spec.kind for i in self.instances.values() if i.up}

    def batch_sizes(self) -> dict[str, int]:
        """op → the smallest efficient micro-batch among the instances that run it."""
        out: dict[str, int] = {}
        for op, kind in OP_KINDS.items():
            sizes = [i.profile.efficient_batch(op) for i in self.instances.values() if i.spec.kind == kind]
            if sizes:
                out[op] = min(sizes)
        return out

    def runs(self, node: OpNode) -> bool:
        """Whether this op runs on an engine instance (else the driver runs it as a tool)."""
        return node.batchable and node.op in OP_KINDS

    # ------------------------------------------------------------------ ops

    def ready(self, qs: QueryState, node: OpNode, op: ToolOp) -> list[Command]:
        self._ready(qs, node, op)
        return self._out.take()

    def _ready(self, qs: QueryState, node: OpNode, op: ToolOp) -> None:
        kind = OP_KINDS[node.op]
        serving = [i for i in self.instances.values() if i.up and i.spec.kind == kind]
        if not serving:
            known = ", ".join(sorted(self.kinds())) or "none"
            self._out.extend(self._ends.fail(qs, f"step {node.key!r}: no {kind} instance is up to run op "
                                                 f"{node.op!r} (engine kinds up: {known})", FailureKind.NO_INSTANCE))
            return
        inst = min(serving, key=lambda i: (i.queued_units + sum(len(b) for b in i.batches.values()), i.name))
        st = OpState(op, node, qs, next(self._seq))
        self.ops[op.id] = st
        self._enqueue(st, inst)

    def _enqueue(self, st: OpState, inst: OpInstance) -> None:
        inst.enqueue(st)
        self._dirty[inst.name] = None

    def finished(self, ev: OpFinished) -> OpState | None:
        """The op this report is about, or None when it is not (or no longer) tracked."""
        st = self.ops.pop(ev.op_id, None)
        if st is None:
            return None
        assert st.instance is not None and st.batch is not None, "an op finishes only after its batch was released"
        inst = self.instances[st.instance]
        left = inst.batches[st.batch]
        left.discard(st.id)
        inst.completed_one()
        if not left:
            del inst.batches[st.batch]
            self._dirty[inst.name] = None
        return st

    def drop_query(self, qs: QueryState) -> None:
        """Forget a failed query's ops (a running batch's other ops carry on)."""
        for st in [s for s in self.ops.values() if s.query is qs]:
            del self.ops[st.id]
            if st.instance is None:
                continue
            inst = self.instances[st.instance]
            if st.id in inst.queue:
                inst.unqueue(st)
            elif st.batch is not None and st.batch in inst.batches:
                inst.batches[st.batch].discard(st.id)
                if not inst.batches[st.batch]:
                    del inst.batches[st.batch]
                    self._dirty[inst.name] = None

    def instance_down(self, name: str) -> list[Command]:
        """Move a lost instance's ops (queued and running) to another of its kind."""
        inst = self.instances.get(name)
        if inst is None or not inst.up:
            return []
        running = [self.ops[i] for b in inst.batches.values() for i in b if i in self.ops]
        inst.batches.clear()
        moved = inst.go_down() + running
        for st in moved:
            del self.ops[st.id]
            if not st.query.failed:
                self._ready(st.query, st.node, st.op)
        return self._out.take()

    def instance_up(self, spec: InstanceSpec) -> list[Command]:
        inst = self.instances.get(spec.name)
        if inst is None or inst.spec != spec:
            self.add_instance(spec)
        else:
            inst.bring_up()
            self._dirty[spec.name] = None
        return []

    # ------------------------------------------------------------------ batches

    def release_all(self) -> list[Command]:
        while self._dirty:
            name = next(iter(self._dirty))
            del self._dirty[name]
            self._release(self.instances[name])
        return self._out.take()

    def _release(self, inst: OpInstance) -> None:
        while inst.up and inst.queue and len(inst.batches) < inst.profile.concurrency:
            order = sorted(inst.queue.values(), key=self._order)
            batch: list[OpState] = []
            units = 0
            max_ops = inst.profile.max_ops or len(order)
            for st in order:
                if batch and units + st.units > inst.profile.max_units:
                    continue  # a smaller op further down may still fit
                batch.append(st)
                units += st.units
                if len(batch) == max_ops:
                    break
            bid = next(self._batches)
            inst.start_batch(bid, batch)
            self._out.append(RunBatch(inst.name, tuple(st.op for st in batch)))
