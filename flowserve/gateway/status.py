"""The live status page: `GET /status` (one self-contained HTML page) polls `GET
/status.json`, which this module builds from the driver's state and the gateway's own
Prometheus counters, so the page and `/metrics` cannot disagree.

Windowed figures (SLO attainment, token hit rate, programs ended "over the last
minutes") are differences of the cumulative counters against a snapshot taken `window_s`
ago; snapshots are taken when the JSON is read, at most one per `SNAPSHOT_EVERY_S`, so
nothing runs in the background. The open programs are read from the gateway's program
book.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from importlib import resources
from typing import Any

from prometheus_client import CollectorRegistry

from flowserve.host.driver import LiveDriver
from flowserve.host.programs.book import LivePrograms
from flowserve.policies.registry import policy_class

WINDOW_S = 300.0  # "the last minutes" of the page
SNAPSHOT_EVERY_S = 1.0
MAX_SNAPSHOTS = 2048  # at one a second: well over the window
ROWS_SHOWN = 50  # open queries and open programs listed


@dataclass(frozen=True)
class Counters:
    """The cumulative counters the windowed figures are differences of."""

    slo_met: float = 0.0
    slo_missed: float = 0.0
    prompt_tokens: float = 0.0
    cached_tokens: float = 0.0
    completed: float = 0.0
    failed: float = 0.0
    rejected: float = 0.0
    programs_ended: float = 0.0  # every way a program ends, failed included
    programs_failed: float = 0.0
    programs_slo_met: float = 0.0
    programs_slo_missed: float = 0.0

    def minus(self, other: Counters) -> Counters:
        return Counters(*(a - b for a, b in zip(self.values(), other.values(), strict=True)))

    def values(self) -> tuple[float, ...]:
        return (self.slo_met, self.slo_missed, self.prompt_tokens, self.cached_tokens, self.completed, self.failed,
                self.rejected, self.programs_ended, self.programs_failed, self.programs_slo_met,
                self.programs_slo_missed)


def read_counters(registry: CollectorRegistry) -> Counters:
    """Sums over every label of the gateway's counters (what /metrics exports)."""
    sums: dict[tuple[str, str], float] = {}
    for metric in registry.collect():
        for s in metric.samples:
            if s.name.endswith("_total"):
                key = (s.name, s.labels.get("result") or s.labels.get("outcome") or s.labels.get("how") or "")
                sums[key] = sums.get(key, 0.0) + s.value
    ended = sum(v for (name, _), v in sums.items() if name == "flowserve_programs_ended_total")
    return Counters(sums.get(("flowserve_slo_total", "met"), 0.0), sums.get(("flowserve_slo_total", "missed"), 0.0),
                    sums.get(("flowserve_prompt_tokens_total", ""), 0.0),
                    sums.get(("flowserve_cached_tokens_total", ""), 0.0),
                    sums.get(("flowserve_queries_total", "completed"), 0.0),
                    sums.get(("flowserve_queries_total", "failed"), 0.0),
                    sums.get(("flowserve_queries_total", "rejected"), 0.0), ended,
                    sums.get(("flowserve_programs_ended_total", "failed"), 0.0),
                    sums.get(("flowserve_programs_slo_total", "met"), 0.0),
                    sums.get(("flowserve_programs_slo_total", "missed"), 0.0))


def share(part: float, whole: float) -> float | None:
    """part / whole, or None when there is nothing to divide (no query, no token yet)."""
    return part / whole if whole > 0 else None


def figures(c: Counters) -> dict[str, Any]:
    return {"slo_met": c.slo_met, "slo_missed": c.slo_missed,
            "slo_attainment": share(c.slo_met, c.slo_met + c.slo_missed),
            "prompt_tokens": c.prompt_tokens, "cached_tokens": c.cached_tokens,
            "token_hit_rate": share(c.cached_tokens, c.prompt_tokens), "completed": c.completed, "failed": c.failed,
            "rejected": c.rejected, "programs_ended": c.programs_ended, "programs_failed": c.programs_failed,
            "programs_slo_met": c.programs_slo_met, "programs_slo_missed": c.programs_slo_missed,
            "programs_slo_attainment": share(c.programs_slo_met, c.programs_slo_met + c.programs_slo_missed)}


class StatusBoard:
    def __init__(self, driver: LiveDriver, programs: LivePrograms | None = None, window_s: float = WINDOW_S) -> None:
        self.driver = driver
        self.programs = programs
        self.window_s = window_s
        self.started = driver.clock()
        self._snapshots: deque[tuple[float, Counters]] = deque([(self.started, Counters())], maxlen=MAX_SNAPSHOTS)
        s = driver.settings  # built-in names, entry points and import paths alike (a plug-in is no KeyError)
        self._classes = policy_class("dispatch", s.dispatch), policy_class("queue", s.queue)

    def _record(self, now: float, counters: Counters) -> None:
        if now - self._snapshots[-1][0] >= SNAPSHOT_EVERY_S:
            self._snapshots.append((now, counters))
        # keep one snapshot at or before the window's start: the baseline of the differences
        while len(self._snapshots) > 1 and self._snapshots[1][0] <= now - self.window_s:
            self._snapshots.popleft()

    def snapshot(self) -> dict[str, Any]:
        d, now = self.driver, self.driver.clock()
        counters = read_counters(d.metrics.registry)
        self._record(now, counters)
        since, base = self._snapshots[0]
        series = [{"ago_s": now - t, **figures(c.minus(base))} for t, c in self._snapshots]
        s = d.settings
        open_ = sorted(d.book.open.values(), key=lambda h: h.id, reverse=True)
        progs = sorted(self.programs.open.values() if self.programs else (), key=lambda p: p.opened, reverse=True)
        return {
            "uptime_s": now - self.started,
            "draining": d.draining,
            "window_s": now - since,  # the window's real span: from the snapshot that starts it
            "window": figures(counters.minus(base)),
            "total": figures(counters),
            "series": series,
            "instances": d.instances(),
            "open_queries": len(open_),
            "queries": [{"id": h.id, "workflow": h.workflow, "tenant": h.tenant, "class": h.cls,
                         "age_s": None if h.arrival is None else now - h.arrival, "slo_s": h.slo_s,
                         "calls_finished": h.calls_finished} for h in open_[:ROWS_SHOWN]],
            "open_programs": len(progs),
            "programs": [{"id": p.id, "tenant": p.tenant, "status": "closing" if p.ended else "open",
                          "calls": p.calls, "calls_in_flight": len(p.inflight), "age_s": now - p.opened,
                          "idle_s": now - p.last, "slo_s": p.slo_s} for p in progs[:ROWS_SHOWN]],
            "policies": {
                "dispatch": {"name": s.dispatch, "params": d.params.active(self._classes[0], s.dispatch_params)},
                "queue": {"name": s.queue, "params": d.params.active(self._classes[1], s.queue_params)},
                "passes": s.passes,
            },
        }


def status_page() -> str:
    """The page: HTML, CSS and script in one file, no external assets."""
    return resources.files("flowserve.gateway").joinpath("status_page.html").read_text()

