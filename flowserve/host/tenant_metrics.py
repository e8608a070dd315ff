"""Per-tenant metric series with a bounded set of labels: the top N tenants by tokens
served have their own series, every other tenant counts under `tenant="other"`.

Which tenants are the top N is learned with bounded memory by the Space-Saving summary
(Metwally, Agrawal, El Abbadi, "Efficient Computation of Frequent and Top-k Elements in
Data Streams", ICDT 2005): `capacity` counters; a tenant not among them replaces the
smallest, inheriting its count, so a tenant's count is never under its true weight and
every tenant heavier than total/capacity is kept.

The ranking is renewed when the metrics are read (a scrape, `/status.json`); until then
the first N tenants take the free series. A tenant that leaves the top N gives its
counts to `other` and its series ends; one that enters starts its series at zero. So
every exported series only grows (a Prometheus counter), and over all tenants the series
sum to everything counted.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, Metric

from flowserve.tenants import OTHER

# family → (metric name, help, its second label, that label's values)
FAMILIES = {
    "slo": ("flowserve_slo", "Queries with a deadline by tenant: met or missed", "result", ("met", "missed")),
    "tokens": ("flowserve_tenant_tokens", "Tokens served per tenant (prompt, output)", "kind", ("prompt", "output")),
}
Series = tuple[str, str]  # (family, the second label's value)
SERIES: tuple[Series, ...] = tuple((f, v) for f, (*_, values) in FAMILIES.items() for v in values)


def space_saving_add(counts: dict[str, float], item: str, weight: float, capacity: int) -> None:
    """Count `weight` for `item` in a Space-Saving summary of at most `capacity` items
    (Metwally et al. 2005, Algorithm 1: the least counted item is replaced)."""
    if item in counts or len(counts) < capacity:
        counts[item] = counts.get(item, 0.0) + weight
        return
    smallest = min(counts, key=counts.__getitem__)
    counts[item] = counts.pop(smallest) + weight


class TenantSeries:
    """A Prometheus collector of the per-tenant counters (`FAMILIES`)."""

    def __init__(self, top: int, capacity: int | None = None) -> None:
        self.top = top
        self.capacity = capacity if capacity is not None else max(8 * top, 64)
        self._weight: dict[str, float] = {}  # the Space-Saving summary: tenant → tokens (over-estimated)
        self._own: dict[str, dict[Series, float]] = {}  # the tenants with their own series
        self._other: dict[Series, float] = dict.fromkeys(SERIES, 0.0)

    def __len__(self) -> int:
        """Tenants remembered: at most `capacity`, however many there are."""
        return len(self._weight)

    def add(self, tenant: str, series: Series, amount: float, weight: float = 0.0) -> None:
        """Count `amount` in the tenant's `series`; `weight` (its tokens) ranks the tenant."""
        if weight and tenant != OTHER:
            space_saving_add(self._weight, tenant, weight, self.capacity)
        own = self._own.get(tenant)
        if own is None and tenant != OTHER and len(self._own) < self.top:
            own = self._own[tenant] = dict.fromkeys(SERIES, 0.0)
        (self._other if own is None else own)[series] += amount

    def rerank(self) -> None:
        """The top N of the summary get their own series (ties keep the incumbents)."""
        ranked = sorted(self._weight, key=lambda t: (-self._weight[t], t not in self._own))[:self.top]
        ranked += [t for t in self._own if t not in ranked][:self.top - len(ranked)]  # free places stay theirs
        keep = set(ranked)
        for tenant in [t for t in self._own if t not in keep]:
            for series, value in self._own.pop(tenant).items():
                self._other[series] += value
        for tenant in ranked:  # its series start at zero (a counter that exists from its first scrape)
            self._own.setdefault(tenant, dict.fromkeys(SERIES, 0.0))

    def collect(self) -> Iterator[Metric]:
        self.rerank()
        families = {f: CounterMetricFamily(name, doc, labels=["tenant", label])
                    for f, (name, doc, label, _) in FAMILIES.items()}
        for tenant, own in [*self._own.items(), (OTHER, self._other)]:
            for (family, value_label), value in own.items():
                families[family].add_metric([tenant, value_label], value)
        yield from families.values()
