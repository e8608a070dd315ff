"""Preble (Srivatsa et al.): E2 global dispatch (§4.2); its local queue, prefix-hit priority
groups (§4.3), is `flowserve.policies.prefix_groups`.

`preble_e2` reads the core's global prefix index (`view.prefix_index`): per node the
instances caching it and the requests routed to each instance that used it within the
window H; per instance the LRU order of its nodes. Formulas are in `preble_costs`.

* exploit when the prefix cached somewhere is longer than the rest: among the candidates
  caching the key portion (the longest matched node) and its live replicas, the least
  loaded (by L);
* explore otherwise: the lowest L + M + R (all three terms; Preble's code omits R);
  with `pd_balance`, a prefill-unit request first goes to an instance whose running
  batch is dominated by decode units, unless its cost exceeds T_hbal × the lowest;
* `rebalance`: a request headed for an instance whose load exceeds T_hbal × the
  lightest's goes to the lightest instead. Load here is the instance's outstanding
  predicted work (the core's cache-aware account), plus this request's own prefill there (so a prefix is not copied
  to another instance when the copy costs more than waiting for its holder);
* `replicate`: when a key portion's mean queueing time (TTFT less the request's own
  predicted prefill, so cold first prefills do not count as waiting) in the latest
  half-window is ≥ 2× the earlier half's, by more than one prefill of the prefix, the lightest instance becomes a
  replica for it for one window. The window in use is H, or the time since the first
  request when the run is shorter (`run_window`): Preble's H of 180 s would otherwise
  leave the earlier half empty in every run under 90 s (exploit then spreads its requests over holders and
  replicas; the replica computes the prefix once and caches it from then on).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated

from flowserve.cache.radix import RadixNode
from flowserve.core.params import Help
from flowserve.core.policy import DispatchPolicy
from flowserve.core.state import CallState, InstanceState
from flowserve.core.view import ClusterView
from flowserve.errors import ConfigError
from flowserve.policies.preble_costs import (
    doubled,
    is_decode_unit,
    load_cost,
    overloaded,
    queueing_time,
    run_cost,
    run_window,
    should_exploit,
)
from flowserve.types.events import CallFailed, CallFinished, Event

MAX_EVICTION_SCAN = 512  # nodes examined for M_i; beyond that the request is huge anyway


@dataclass(slots=True)
class Routed:
    """A call E2 routed, until it finishes."""

    instance: str
    time: float
    prefill_s: float
    decode_unit: bool
    key: RadixNode | None  # the key portion it was exploited on


@dataclass(slots=True)
class Window:
    """One instance's requests and decode times within the window H."""

    routed: deque[tuple[float, float]] = field(default_factory=deque)  # (time, PT)
    prefill_s: float = 0.0
    decodes: deque[tuple[float, float]] = field(default_factory=deque)  # (time, DT)
    decode_s: float = 0.0

    def routed_one(self, now: float, pt: float) -> None:
        """A request routed here now, with prefill time `pt`."""
        self.routed.append((now, pt))
        self.prefill_s += pt

    def decoded(self, now: float, dt: float) -> None:
        """A request finished decoding here now, after `dt` seconds of decode."""
        self.decodes.append((now, dt))
        self.decode_s += dt

    def expire(self, horizon: float) -> None:
        while self.routed and self.routed[0][0] < horizon:
            self.prefill_s -= self.routed.popleft()[1]
        while self.decodes and self.decodes[0][0] < horizon:
            self.decode_s -= self.decodes.popleft()[1]
        if not self.routed:
            self.prefill_s = 0.0  # no float drift across idle periods
        if not self.decodes:
            self.decode_s = 0.0


class PrebleE2(DispatchPolicy):
    name = "preble_e2"
    needs_prefix_index = True

    def __init__(self, window_s: Annotated[float, Help("the request-history window H, seconds (Preble: 3 min)")]
                 = 180.0,
                 t_hbal: Annotated[float, Help("rebalance when an instance's load exceeds this × the lightest's, "
                                               "≥ 1 (Preble: 1.5)")] = 1.5,
                 rebalance: Annotated[bool, Help("post-assignment rebalancing (§4.2)")] = True,
                 replicate: Annotated[bool, Help("hot-prefix replication (§4.2)")] = True,
                 pd_balance: Annotated[bool, Help("prefill/decode balancing of the exploration cost (§4.2)")]
                 = True) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        if t_hbal < 1:
            raise ValueError(f"t_hbal must be ≥ 1, got {t_hbal}")
        self.window_s = self.prefix_window_s = window_s
        self.t_hbal = t_hbal
        self.rebalance = rebalance
        self.replicate = replicate
        self.pd_balance = pd_balance
        self._windows: dict[str, Window] = {}
        self._routed: dict[int, Routed] = {}
        self._ttft: dict[RadixNode, deque[tuple[float, float]]] = {}
        self._replicas: dict[RadixNode, dict[str, float]] = {}
        self._pt: dict[tuple[str, str, int], dict[int, float]] = {}
        self._decisions = 0
        self._first: float | None = None  # when the first request was routed
        self.stats = {"exploit": 0, "explore": 0, "rebalanced": 0, "pd_balanced": 0, "replicated": 0}

    # ------------------------------------------------------------------ loads

    def window(self, now: float) -> float:
        """H in use now: `window_s`, or the run's length so far when shorter (`run_window`)."""
        return run_window(self.window_s, 0.0 if self._first is None else now - self._first)

    def _window(self, name: str, now: float) -> Window:
        w = self._windows.get(name)
        if w is None:
            w = self._windows[name] = Window()
        w.expire(now - self.window(now))
        return w

    def load(self, inst: InstanceState, now: float, cluster_decode: float | None = None) -> float:
        """L_i of an instance at `now`: its window requests' prefill, plus the window's
        mean decode time each (the instance's own, else the cluster's)."""
        w = self._window(inst.name, now)
        if w.decodes:
            dt = w.decode_s / len(w.decodes)
        else:
            dt = self._cluster_decode() if cluster_decode is None else cluster_decode
        return load_cost(w.prefill_s, len(w.routed), dt)

    def _cluster_decode(self) -> float:
        n = sum(len(w.decodes) for w in self._windows.values())
        return sum(w.decode_s for w in self._windows.values()) / n if n else 0.0

    def _prefill(self, inst: InstanceState, tokens: int) -> float:
        """PT of `tokens` on the instance's hardware (memoised: M_i asks it per node)."""
        table = self._pt.get(inst.profile)
        if table is None:
            table = self._pt[inst.profile] = {}
        t = table.get(tokens)
        if t is None:
            t = table[tokens] = inst.cost.prefill_time(tokens)
        return t

    def eviction_cost(self, inst: InstanceState, new_tokens: int, keep: set[RadixNode],
                      view: ClusterView) -> float:
        """M_i: Σ PT_j · N_j over the nodes `inst` would evict (LRU, leaves first) to fit
        `new_tokens` more; nodes of the request's own path are kept."""
        idx = view.prefix_index
        assert idx is not None
        capacity = inst.kv_capacity if inst.kv_capacity is not None else 1 << 62
        free = max(0, capacity - idx.cached_tokens.get(inst.name, 0))
        short = new_tokens - free
        if short <= 0:
            return 0.0
        now, cost, freed, scanned = view.now, 0.0, 0, 0
        for node in idx.lru_nodes(inst.name):
            if node in keep:
                continue
            n_req = idx.requests(node, inst.name, now)
            if n_req:
                cost += self._prefill(inst, len(node.key)) * n_req
            freed += len(node.key)
            scanned += 1
            if freed >= short or scanned >= MAX_EVICTION_SCAN:
                break
        return cost

    # ------------------------------------------------------------------ dispatch

    def choose(self, cs: CallState, candidates: Sequence[InstanceState],
               view: ClusterView) -> InstanceState:
        idx = view.prefix_index
        if idx is None:
            raise ConfigError("dispatch policy 'preble_e2' needs the core's prefix index")
        now = view.now
        if self._first is None:
            self._first = now
        call = cs.call
        total = call.input_tokens
        by_name = {i.name: i for i in candidates}
        path, partial, j = idx.match_path(call.prompt)
        cached = dict.fromkeys(by_name, 0)
        key: RadixNode | None = None
        key_len = 0
        for node in path:
            holders = [h for h in node.data if h in cached]
            if not holders:
                break  # presence is path-closed: nobody below holds more
            for h in holders:
                cached[h] = node.depth
            if len(node.key) >= key_len:
                key, key_len = node, len(node.key)
        else:
            if partial is not None:
                holders = [h for h in partial.data if h in cached]
                for h in holders:
                    cached[h] = partial.depth - len(partial.key) + j
                if holders and j >= key_len:
                    key, key_len = partial, j
        matched = max(cached.values(), default=0)
        mean_dt = self._cluster_decode()
        loads = {name: self.load(inst, now, mean_dt) for name, inst in by_name.items()}
        uncached = {name: total - min(cached[name], total - 1) for name in by_name}
        runs = {name: run_cost(inst.cost, uncached[name], total - uncached[name])
                for name, inst in by_name.items()}
        exploited = None
        if key is not None and should_exploit(matched, total):
            holders = {h for h in key.data if h in by_name}
            for r, until in self._replicas.get(key, {}).items():
                if until > now and r in by_name:
                    holders.add(r)
            target = by_name[min(holders, key=lambda h: (by_name[h].outstanding, loads[h], h))]
            exploited = key
            self.stats["exploit"] += 1
        else:
            target = self._explore(cs, candidates, view, loads, uncached, runs, set(path))
            self.stats["explore"] += 1
        if self.rebalance and len(candidates) > 1:
            light = min(candidates, key=lambda i: (i.outstanding, i.name))

            def with_request(i: InstanceState) -> float:
                return i.outstanding + runs[i.name]

            if light is not target and overloaded(with_request(target), with_request(light), self.t_hbal):
                target, exploited = light, None
                self.stats["rebalanced"] += 1
        self._record(cs, target, runs[target.name], exploited, now)
        return target

    def _explore(self, cs: CallState, candidates: Sequence[InstanceState], view: ClusterView,
                 loads: dict[str, float], uncached: dict[str, int], runs: dict[str, float],
                 path: set[RadixNode]) -> InstanceState:
        costs = {}
        for inst in candidates:
            m = self.eviction_cost(inst, uncached[inst.name] + cs.call.predicted_output, path, view)
            costs[inst.name] = loads[inst.name] + m + runs[inst.name]
        best = min(candidates, key=lambda i: (costs[i.name], i.name))
        if self.pd_balance and not is_decode_unit(runs[best.name], self._decode_time(cs, best)):
            # within one prefill of the best: the decode-bound batch absorbs it
            lowest = costs[best.name]
            dominated = [i for i in candidates if self._decode_dominated(i)
                         and costs[i.name] <= lowest + runs[i.name]]
            if dominated:
                pick = min(dominated, key=lambda i: (costs[i.name], i.name))
                if pick is not best:
                    self.stats["pd_balanced"] += 1
                return pick
        return best

    def _decode_time(self, cs: CallState, inst: InstanceState) -> float:
        total = cs.call.input_tokens
        return max(cs.call.predicted_output - 1, 0) * inst.cost.decode_step_time(1, total)

    def _forget(self, call_id: int) -> Routed | None:
        return self._routed.pop(call_id, None)

    def _decode_dominated(self, inst: InstanceState) -> bool:
        """The running batch holds at least twice as many decode units as prefill units."""
        dec = pre = 0
        for call_id in inst.running:
            r = self._routed.get(call_id)
            if r is None:
                continue
            if r.decode_unit:
                dec += 1
            else:
                pre += 1
        return dec >= 2 and dec >= 2 * pre

    def _record(self, cs: CallState, inst: InstanceState, pt: float,
                key: RadixNode | None, now: float) -> None:
        self._window(inst.name, now).routed_one(now, pt)
        self._forget(cs.id)  # re-dispatched after a failure
        self._routed[cs.id] = Routed(inst.name, now, pt, is_decode_unit(pt, self._decode_time(cs, inst)), key)
        self._decisions += 1
        if self._decisions % 4096 == 0:
            self._purge(now)

    def _purge(self, now: float) -> None:
        """Forget calls that never reported back (their query failed) and dead nodes."""
        old = now - 2 * self.window_s
        for cid in [c for c, r in self._routed.items() if r.time < old]:
            self._forget(cid)
        for table in (self._ttft, self._replicas):
            for node in [n for n in table if n.parent is None]:
                del table[node]

    # ------------------------------------------------------------------ feedback

    def observe(self, event: Event, view: ClusterView) -> Sequence[object]:
        if isinstance(event, CallFinished):
            r = self._forget(event.call_id)
            if r is None:
                return ()
            if event.first_token is not None:
                self._window(r.instance, event.time).decoded(event.time, event.time - event.first_token)
            if self.replicate and r.key is not None:
                first = event.first_token if event.first_token is not None else event.time
                self._watch(r.key, queueing_time(first - r.time, r.prefill_s), view)
        elif isinstance(event, CallFailed):
            self._forget(event.call_id)
        return ()

    def _watch(self, key: RadixNode, waited: float, view: ClusterView) -> None:
        """Autoscaling: replicate a key portion whose mean queueing time doubled within the window."""
        now = view.now
        samples = self._ttft.get(key)
        if samples is None:
            samples = self._ttft[key] = deque()
        samples.append((now, waited))
        window = self.window(now)
        while samples and samples[0][0] < now - window:
            samples.popleft()
        half = now - window / 2
        early = [t for s, t in samples if s < half]
        recent = [t for s, t in samples if s >= half]
        if not doubled(early, recent):
            return
        holders = set(key.data) | {r for r, u in self._replicas.get(key, {}).items() if u > now}
        spare = [i for i in view.up_instances() if i.name not in holders]
        if not spare:
            return
        light = min(spare, key=lambda i: (i.outstanding, i.name))
        gain = sum(recent) / len(recent) - sum(early) / len(early)
        if gain <= run_cost(light.cost, key.depth):
            return  # the wait grew by less than copying the prefix would cost
        self._replicas.setdefault(key, {})[light.name] = now + window
        samples.clear()  # the next replica needs fresh evidence
        self.stats["replicated"] += 1
