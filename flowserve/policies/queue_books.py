"""What a queue policy remembers of the calls it released to its instance, until they
finish: when each started, the prefill it owed, its context and its class.

The core removes a finished call from `inst.running`; the book notices at its next
`sync` (O(running) only when something left). From it a queue answers the prefill
seconds the running calls still owe (prefills go one after the other through the
engine's token budget), the running batch's mean context (for the sweet spot) and how
many of them are interactive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flowserve.core.policy import Ahead
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import TYPICAL_CONTEXT


@dataclass(slots=True)
class Started:
    interactive: bool
    tenant: str | None  # an interactive call's tenant; None for batch work
    start: float  # release time
    prefill_s: float  # seconds its uncached prompt holds the token budget
    context: float  # prompt + half the predicted output
    fragile: bool = False  # a deadline a bigger batch would make it miss (`flowserve_gate`)
    shielded: bool = False  # to be served as if alone beside a tenant over its share (`flowserve_gate`)


class RunningBook:
    __slots__ = ("_calls", "_context", "_latest", "_owing", "fragile", "interactive", "shielded", "tenants")

    def __init__(self) -> None:
        self._calls: dict[int, Started] = {}
        # the calls that may still owe prefill at `_latest` (the latest time asked), in release
        # order: one found done is dropped for good, so `prefill_owed_s` scans only the few
        # still prefilling (the core's time only moves on; an earlier time scans them all)
        self._owing: dict[int, Started] = {}
        self._latest = -math.inf
        self._context = 0.0
        self.interactive = 0  # interactive calls running
        self.fragile = 0  # running calls started fragile
        self.shielded = 0  # running calls started shielded
        self.tenants: dict[str, int] = {}  # interactive calls running per tenant

    def __len__(self) -> int:
        return len(self._calls)

    def start(self, cs: CallState, now: float, prefill_s: float, fragile: bool = False,
              shielded: bool = False) -> None:
        """The call was released (call `sync` first: the core adds it to `inst.running` after)."""
        q = cs.query.query
        interactive = q.cls != "batch"
        s = Started(interactive, q.tenant if interactive else None, now, prefill_s,
                    cs.input_tokens + cs.predicted_output / 2, fragile, shielded)
        old = self._calls.pop(cs.id, None)
        if old is not None:
            self._drop(old)
            self._owing.pop(cs.id, None)
        self._calls[cs.id] = s
        if prefill_s > 0:
            self._owing[cs.id] = s
        self._context += s.context
        self.interactive += s.interactive
        self.fragile += s.fragile
        self.shielded += s.shielded
        if s.tenant is not None:
            self.tenants[s.tenant] = self.tenants.get(s.tenant, 0) + 1

    def _drop(self, s: Started) -> None:
        self._context -= s.context
        self.interactive -= s.interactive
        self.fragile -= s.fragile
        self.shielded -= s.shielded
        if s.tenant is not None:
            left = self.tenants[s.tenant] - 1
            if left:
                self.tenants[s.tenant] = left
            else:
                del self.tenants[s.tenant]

    def sync(self, inst: InstanceState) -> None:
        """Forget the calls that left the instance (finished, failed or moved). Every call
        running there was started here, so equal sizes mean none left."""
        if len(self._calls) <= len(inst.running):
            return
        running = inst.running
        for cid in [c for c in self._calls if c not in running]:
            self._drop(self._calls.pop(cid))
            self._owing.pop(cid, None)
        if not self._calls:  # no float drift across idle periods
            self._context = 0.0

    def prefill_owed_s(self, now: float) -> float:
        """Prefill seconds the running calls still owe, each counted from its release."""
        if now < self._latest:
            return sum(max(0.0, s.prefill_s - (now - s.start)) for s in self._calls.values() if s.prefill_s > 0)
        self._latest = now
        owed = 0.0
        done = None
        for cid, s in self._owing.items():
            left = s.prefill_s - (now - s.start)
            if left > 0.0:
                owed += left
            elif done is None:
                done = [cid]
            else:
                done.append(cid)
        if done is not None:
            for cid in done:
                del self._owing[cid]
        return owed

    def context_sum(self) -> float:
        return self._context

    def context(self) -> float:
        """Mean context of the running calls (TYPICAL_CONTEXT with none)."""
        return self._context / len(self._calls) if self._calls else TYPICAL_CONTEXT


class WaitingTally:
    """Sums over a queue's waiting calls, per group (a tenant's interactive calls, or the
    batch calls): count, predicted work and prefill seconds. Sums of floats are reset when
    a group empties, so they do not drift."""

    __slots__ = ("groups",)

    def __init__(self) -> None:
        self.groups: dict[str | None, list[float]] = {}  # group → [calls, work s, prefill s]

    def add(self, group: str | None, work_s: float, prefill_s: float) -> None:
        g = self.groups.get(group)
        if g is None:
            g = self.groups[group] = [0, 0.0, 0.0]
        g[0] += 1
        g[1] += work_s
        g[2] += prefill_s

    def remove(self, group: str | None, work_s: float, prefill_s: float) -> None:
        g = self.groups[group]
        if g[0] <= 1:
            del self.groups[group]
            return
        g[0] -= 1
        g[1] = max(0.0, g[1] - work_s)
        g[2] = max(0.0, g[2] - prefill_s)

    def total(self, keep=None) -> Ahead:
        """The sums over the groups `keep(group)` accepts (all by default)."""
        n, work, prefill = 0, 0.0, 0.0
        for group, (c, w, p) in self.groups.items():
            if keep is None or keep(group):
                n += int(c)
                work += w
                prefill += p
        return Ahead(n, work, prefill)


class ServiceMeter:
    """Engine seconds per finished call, observed on the queries whose calls a queue saw:
    each query's attained service (`QueryState.service_s`) over its finished calls, summed
    over the queries and updated whenever one pushes a call. Quanta and thresholds scale
    with it instead of fixed seconds; `fallback` answers before any call finished."""

    __slots__ = ("_calls", "_last", "_seconds")

    def __init__(self) -> None:
        self._last: dict[int, tuple[float, int]] = {}  # query id → (service s, finished calls) counted
        self._seconds = 0.0
        self._calls = 0

    def saw(self, cs: CallState) -> None:
        qs = cs.query
        done = sum(qs.run.calls_by_stage.values()) - len(qs.inflight)
        if done <= 0:
            return
        seconds, calls = self._last.get(qs.id, (0.0, 0))
        self._seconds += qs.service_s - seconds
        self._calls += done - calls
        self._last[qs.id] = (qs.service_s, done)
        if len(self._last) > 4096:  # ended queries: keep the totals, forget the oldest entries
            for qid in list(self._last)[:2048]:
                del self._last[qid]

    def mean_s(self, fallback: float) -> float:
        return self._seconds / self._calls if self._calls > 0 and self._seconds > 0 else fallback
