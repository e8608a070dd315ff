"""The core's book of LLM calls: binding them (`flowserve.core._binding`), then their
flight — finished, failed and retried elsewhere, dropped — and the instances they run
on coming and going. Every call moves along `flowserve.core.lifecycle`; `tracked` holds
the live ones. Each public method answers with the commands it caused, in order.
"""

from __future__ import annotations

from flowserve.core._binding import Binder
from flowserve.core.lifecycle import CallStatus
from flowserve.core.records import FinishedCall
from flowserve.core.state import CallState, InstanceState
from flowserve.types.commands import CancelCall, Command
from flowserve.types.events import CallFailed, CallFinished, InstanceCapacity, InstanceDown, InstanceUp, PrefillDone

S = CallStatus


class CallBook(Binder):

    # ------------------------------------------------------------------ shared prefills

    def on_prefill_done(self, ev: PrefillDone) -> list[Command]:
        cs = self.running_on(ev.call_id, ev.instance)
        if cs is not None:
            if cs.status is S.RELEASED:
                cs.move(S.RUNNING)
            self._release_followers(cs)
        return self._out.take()

    # ------------------------------------------------------------------ in-flight calls

    def running_on(self, call_id: int, instance: str) -> CallState | None:
        """The call in flight on `instance` this report is about, or None for a stale
        report (the call was cancelled or moved to another instance meanwhile)."""
        cs = self.tracked.get(call_id)
        if cs is None or cs.instance != instance or not cs.status.in_flight:
            return None
        assert call_id in self.instances[instance].running
        return cs

    def on_progress(self, cs: CallState) -> None:
        if cs.status is S.RELEASED:
            cs.move(S.RUNNING)

    def _take_running(self, call_id: int, instance: str) -> tuple[CallState, InstanceState] | None:
        """The in-flight call an engine reports on, taken off its instance (None: a stale report)."""
        cs = self.running_on(call_id, instance)
        if cs is None:
            return None
        inst = self.instances[instance]
        inst.stop(cs)
        self._dirty[inst] = None
        self._release_followers(cs)
        return cs, inst

    def finish(self, ev: CallFinished) -> tuple[CallState, InstanceState, list[Command]] | None:
        """The call the engine finished, off its instance and out of the book (None: a stale
        report), with the commands that caused (its prefill's followers dispatched anew)."""
        taken = self._take_running(ev.call_id, ev.instance)
        if taken is None:
            return None
        cs, inst = taken
        call = cs.call
        assert call is not None
        inst.completed_one()
        cs.move(S.FINISHED)
        if self.prefix_index is not None and self.kv.keeps_estimate(inst.name):
            # the engine holds the whole prompt now, even parts it evicted while the call waited
            self.prefix_index.add(call.prompt, inst.name, ev.time, count=False)
        self.predictor.observe(call.workflow, call.stage, ev.output_tokens)
        self.tenants.finished(call.tenant, ev.output_tokens)
        released = cs.released if cs.released is not None else ev.time
        inst.history.append(FinishedCall(
            call.id, call.workflow, call.stage, call.input_tokens, ev.output_tokens,
            ev.cached_tokens, cs.enqueued, released, ev.time, ev.first_token, cs.t_comp))
        del self.tracked[cs.id]
        return cs, inst, self._out.take()

    def on_failed(self, ev: CallFailed) -> list[Command]:
        taken = self._take_running(ev.call_id, ev.instance)
        if taken is None:
            return []
        cs, inst = taken
        attempts = cs.attempt_failed()
        if ev.retryable and attempts <= self.max_retries:
            cs.exclude(inst.name)
            self._redispatch(cs)
        else:
            self._fail_call(cs, f"call {cs.stage!r} failed on {inst.name} after "
                                f"{attempts} attempt(s): {ev.reason}", ev.kind)
        return self._out.take()

    def _redispatch(self, cs: CallState) -> None:
        cs.unbind()
        self._bind_or_pool(cs)

    def drop(self, cs: CallState) -> list[Command]:
        """Forget a call of an ended query wherever it is (an in-flight one is cancelled)."""
        self._drop(cs)
        return self._out.take()

    # ------------------------------------------------------------------ instances

    def slots_changed(self, inst: InstanceState) -> None:
        """The instance may start more or fewer calls now (peer replicas' load moved):
        released from after this event."""
        self._dirty[inst] = None

    def on_capacity(self, ev: InstanceCapacity) -> list[Command]:
        inst = self.fleet.capacity(ev)
        if inst is not None:
            self._dirty[inst] = None
        return []

    def on_instance_up(self, ev: InstanceUp) -> list[Command]:
        old = self.instances.get(ev.spec.name)
        if old is not None and old.spec != ev.spec:
            self._evacuate(old)  # its calls move before the replacement exists
        self._dirty[self.fleet.bring_up(ev.spec)] = None
        return self._out.take()

    def on_instance_down(self, ev: InstanceDown) -> list[Command]:
        inst = self.instances.get(ev.instance)
        if inst is not None and inst.up:
            self._evacuate(inst)
        return self._out.take()

    def _evacuate(self, inst: InstanceState) -> None:
        """Move every call of a lost instance elsewhere (in-flight ones are cancelled)."""
        queued, running = self.fleet.take_down(inst)
        for cs in running:
            self._out.append(CancelCall(cs.id, inst.name))
        moved = queued + running
        for cs in moved:
            self._release_followers(cs)
        if self.prefix_index is not None:
            self.prefix_index.remove_instance(inst.name)
        for cs in moved:
            if not cs.query.failed:
                cs.exclude(inst.name)
                self._redispatch(cs)
