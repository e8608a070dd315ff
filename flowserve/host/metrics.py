"""Prometheus metrics of one gateway, on its own `CollectorRegistry` (no global state).

Event-driven series are updated as things happen: by the host's facts (a call sent or
ended, a query or a program ended, a policy's new parameters: `flowserve.host.facts`),
and by the call runner's retries and circuit trips; the per-instance state (queue depth,
in-flight calls, outstanding predicted work, up, circuit) is read through the scheduler
core's query API at scrape time by `CoreCollector`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from flowserve.core.records import InstanceStatus
from flowserve.host.facts import CallEnded, CallSent, ProgramEnded, QueryEnded
from flowserve.host.query import QueryStatus
from flowserve.host.tenant_metrics import TenantSeries
from flowserve.types.commands import PolicyChanged
from flowserve.types.events import CallFinished
from flowserve.types.work import Tokens

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250)
CIRCUIT = {"closed": 0, "open": 1, "half_open": 2}


class CoreCollector:
    """Per-instance gauges from the core's instance status, read when scraped."""

    def __init__(self, status: Callable[[], list[InstanceStatus]], circuit: Callable[[str], str]) -> None:
        self._status = status
        self._circuit = circuit

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("flowserve_instance_queue_depth", "Calls waiting in the instance's queue",
                                  labels=["instance"])
        inflight = GaugeMetricFamily("flowserve_instance_inflight", "Calls running on the instance",
                                     labels=["instance"])
        work = GaugeMetricFamily("flowserve_instance_outstanding_seconds",
                                 "Predicted seconds of queued and running work (Hexgen t_queue)", labels=["instance"])
        up = GaugeMetricFamily("flowserve_instance_up", "1 if the instance takes calls", labels=["instance"])
        circuit = GaugeMetricFamily("flowserve_instance_circuit", "Circuit breaker: 0 closed, 1 open, 2 half-open",
                                    labels=["instance"])
        sent = CounterMetricFamily("flowserve_instance_dispatched", "Calls the dispatch policy sent here",
                                   labels=["instance"])
        for s in self._status():
            name = s.name
            depth.add_metric([name], s.queued)
            inflight.add_metric([name], s.running)
            work.add_metric([name], s.outstanding_s)
            up.add_metric([name], 1.0 if s.up else 0.0)
            circuit.add_metric([name], CIRCUIT.get(self._circuit(name), 0))
            sent.add_metric([name], s.dispatched)
        yield from (depth, inflight, work, up, circuit, sent)


class GatewayMetrics:
    def __init__(self, dispatch_policy: str, tenant_series: int = 20,
                 prefix_hit: Callable[[Tokens, str], int] | None = None) -> None:
        """tenant_series: the tenants with their own per-tenant series (`TenantSeries`);
        prefix_hit: the tokens the router's prefix index expects cached on an instance
        (None: the core keeps no index)."""
        self.policy = dispatch_policy
        self._prefix_hit = prefix_hit
        self.registry = r = CollectorRegistry()
        self.tenants = TenantSeries(tenant_series)
        r.register(self.tenants)
        self.queries = Counter("flowserve_queries", "Queries by workflow and outcome "
                               "(completed, failed, rejected)", ["workflow", "outcome"], registry=r)
        self.latency = Histogram("flowserve_query_latency_seconds", "End-to-end query latency", ["workflow"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.ttft = Histogram("flowserve_ttft_seconds", "LLM call: from its release to the engine to its first token",
                              ["instance"], buckets=LATENCY_BUCKETS, registry=r)
        self.routing = Counter("flowserve_routing_decisions", "Calls released to an instance, by dispatch policy",
                               ["policy", "instance"], registry=r)
        self.prompt_tokens = Counter("flowserve_prompt_tokens", "Prompt tokens of finished calls", ["instance"],
                                     registry=r)
        self.cached_tokens = Counter("flowserve_cached_tokens", "Prompt tokens the engine reported cached",
                                     ["instance"], registry=r)
        self.prefix_estimate = Counter("flowserve_prefix_hit_estimate_tokens",
                                       "Prompt tokens the router's prefix index expected cached at release",
                                       ["instance"], registry=r)
        self.evicted = Counter("flowserve_prefix_evicted_estimate_tokens",
                               "Tokens the driver's cache estimate evicted from the prefix index", ["instance"],
                               registry=r)
        self.engine_errors = Counter("flowserve_engine_errors", "Engine call errors", ["instance", "retryable"],
                                     registry=r)
        self.retries = Counter("flowserve_engine_retries", "Same-instance retries after a retryable error",
                               ["instance"], registry=r)
        self.trips = Counter("flowserve_circuit_trips", "Times an instance's circuit opened", ["instance"],
                             registry=r)
        self.policy_changes = Counter("flowserve_policy_changes", "Parameter changes policies made", ["policy"],
                                      registry=r)
        self.policy_param = Gauge("flowserve_policy_param", "Current numeric policy parameters",
                                  ["policy", "param"], registry=r)
        self.jobs = Counter("flowserve_jobs", "Background jobs (RunJob) by outcome", ["outcome"], registry=r)
        self.record_errors = Counter("flowserve_record_errors", "Finished queries `gateway.record` could not write "
                                     "(a full disk): the queries were answered, their records dropped", registry=r)
        self.programs_ended = Counter("flowserve_programs_ended", "Programs that ended, by how (deleted, idle, "
                                      "duration, failed, shutdown)", ["how"], registry=r)
        self.programs_slo = Counter("flowserve_programs_slo", "Ended programs with a deadline (x-slo-ms): met or "
                                    "missed", ["result"], registry=r)
        self.kv_bad = Counter("flowserve_kv_events_bad", "Engine cache events not applied as sent, by kind (gap, "
                              "stale, malformed, broken, skipped, frames, replay_short, replay_failed, restart)",
                              ["instance", "kind"], registry=r)

    # ------------------------------------------------------------------ facts

    def call_sent(self, fact: CallSent) -> None:
        self.routing.labels(self.policy, fact.instance).inc()
        if self._prefix_hit is not None:
            self.prefix_estimate.labels(fact.instance).inc(self._prefix_hit(fact.call.prompt, fact.instance))

    def call_ended(self, fact: CallEnded) -> None:
        ev = fact.outcome
        if fact.current and isinstance(ev, CallFinished):
            self.prompt_tokens.labels(ev.instance).inc(ev.prompt_tokens)
            self.cached_tokens.labels(ev.instance).inc(ev.cached_tokens)

    def query_ended(self, fact: QueryEnded) -> None:
        q, r = fact.query, fact.result
        self.queries.labels(q.workflow, r.status).inc()
        if r.status is QueryStatus.COMPLETED:
            self.latency.labels(q.workflow).observe(r.latency_s)
        if q.slo_s is not None:
            self.tenants.add(q.tenant, ("slo", "met" if r.deadline_met else "missed"), 1)
        for c in r.calls:
            self.tenants.add(q.tenant, ("tokens", "prompt"), c.prompt_tokens, c.prompt_tokens + c.output_tokens)
            self.tenants.add(q.tenant, ("tokens", "output"), c.output_tokens)

    def program_ended(self, fact: ProgramEnded) -> None:
        self.programs_ended.labels(fact.how).inc()
        if fact.deadline_met is not None:
            self.programs_slo.labels("met" if fact.deadline_met else "missed").inc()

    def policy_changed(self, cmd: PolicyChanged) -> None:
        self.policy_changes.labels(cmd.policy).inc()
        for key, value in cmd.params.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                self.policy_param.labels(cmd.policy, key).set(float(value))

    def attach(self, collector: Any) -> None:
        self.registry.register(collector)

    def render(self) -> bytes:
        return generate_latest(self.registry)
