"""Read-only faces of the core's state, as `ClusterView` hands it to policies: instances,
queries (and their graphs), the output predictor and the router's prefix index. Each
proxies the core's own object: fields are properties without setters (C-level getters),
containers read-only mappings, and only reading methods are there, so nothing reached
through the view changes the core's books. The calls and instances a policy hook is
called with are the core's own objects (a dispatch policy returns one of its
candidates), read-only by contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from operator import attrgetter
from types import MappingProxyType

from flowserve.cache.prefix_index import PrefixIndex
from flowserve.cache.radix import RadixNode
from flowserve.core.records import FinishedCall
from flowserve.core.state import CallState, InstanceQueue, InstanceState, QueryState
from flowserve.graph.nodes import CallEstimate, Node, NodeResult
from flowserve.graph.runtime import QueryRun
from flowserve.graph.workflow import Workflow
from flowserve.profiles.cost_model import CostModel
from flowserve.profiles.predictor import OutputPredictor
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import Query, Tokens


def _reads(*names: str) -> Callable[[type], type]:
    """A read-only property per name, read from the proxied object `_s` (a method: the
    proxied object's own, bound; C-level getters, no Python frame per read)."""
    def add(cls: type) -> type:
        for name in names:
            setattr(cls, name, property(attrgetter(f"_s.{name}")))
        return cls
    return add


@_reads("name", "spec", "cost", "profile", "queue", "outstanding", "up", "free_seqs", "headroom", "kv_free",
        "kv_capacity", "max_context", "dispatched", "completed", "slots_free", "has_room", "serves",
        "peer_outstanding", "peer_running", "peer_queued", "peers")
class InstanceView:
    """An instance: its state's fields; its running calls and waiting tenants as read-only
    mappings, its recent history as a tuple."""

    __slots__ = ("_running", "_s", "_tenants")
    name: str
    spec: InstanceSpec
    cost: CostModel
    profile: tuple
    queue: InstanceQueue
    outstanding: float
    up: bool
    free_seqs: int
    headroom: int
    kv_free: int
    kv_capacity: int | None
    max_context: int | None
    dispatched: int
    completed: int
    slots_free: int
    has_room: bool
    serves: Callable[[str | None], bool]
    peer_outstanding: float  # peer replicas' share (`flowserve.core._peers`)
    peer_running: int
    peer_queued: int
    peers: int

    def __init__(self, state: InstanceState) -> None:
        self._s = state
        self._running = MappingProxyType(state.running)  # its dicts live as long as the instance
        self._tenants = MappingProxyType(state.waiting_tenants)

    @property
    def running(self) -> Mapping[int, CallState]:
        return self._running

    @property
    def waiting_tenants(self) -> Mapping[str, int]:
        return self._tenants

    @property
    def history(self) -> tuple[FinishedCall, ...]:
        return tuple(self._s.history)

    def __repr__(self) -> str:
        return f"InstanceView({self._s!r})"


@_reads("workflow")
class RunView:
    """A query's graph: its nodes, results and issued steps as read-only mappings."""

    __slots__ = ("_issued", "_nodes", "_results", "_s")
    workflow: Workflow

    def __init__(self, run: QueryRun) -> None:
        self._s = run
        self._nodes = MappingProxyType(run.nodes)
        self._results = MappingProxyType(run.results)
        self._issued = MappingProxyType(run.issued)

    @property
    def nodes(self) -> Mapping[str, Node]:
        return self._nodes

    @property
    def results(self) -> Mapping[str, NodeResult]:
        return self._results

    @property
    def issued(self) -> Mapping[str, None]:
        return self._issued


@_reads("id", "query", "failed", "ended", "progressed", "service_s", "last_instance", "expected_remaining",
        "path_service")
class QueryView:
    """A query: its state's fields, its graph (`RunView`) and live calls read-only."""

    __slots__ = ("_inflight", "_run", "_s")
    id: int
    query: Query
    failed: bool
    ended: bool
    progressed: float
    service_s: float
    last_instance: str | None
    expected_remaining: Callable[[], Sequence[CallEstimate]]
    path_service: Callable[[Sequence[str]], float]

    def __init__(self, state: QueryState) -> None:
        self._s = state
        self._run = RunView(state.run)
        self._inflight = MappingProxyType(state.inflight)

    @property
    def run(self) -> RunView:
        return self._run

    @property
    def inflight(self) -> Mapping[int, CallState]:
        return self._inflight



class QueryViews(Mapping[int, QueryView]):
    """The open queries by id, each as a `QueryView` (made when read)."""

    __slots__ = ("_queries",)

    def __init__(self, queries: Mapping[int, QueryState]) -> None:
        self._queries = queries

    def __getitem__(self, query_id: int) -> QueryView:
        return QueryView(self._queries[query_id])

    def __contains__(self, query_id: object) -> bool:
        return query_id in self._queries

    def __iter__(self) -> Iterator[int]:
        return iter(self._queries)

    def __len__(self) -> int:
        return len(self._queries)


@_reads("prior", "predict", "predict_call", "observations")
class PredictorReader:
    """The output predictor's answers (the core alone teaches it)."""

    __slots__ = ("_s",)
    prior: Callable[[str, str], float]
    predict: Callable[[str, str], int]
    predict_call: Callable[[int, str, str, str], int]
    observations: Callable[[str, str], int]

    def __init__(self, predictor: OutputPredictor) -> None:
        self._s = predictor


@_reads("window_s", "match_by_instance", "match_path", "requests", "lru_nodes", "path_tokens")
class IndexReader:
    """The router's prefix index, reads only (`flowserve.cache.prefix_index.PrefixReader`)."""

    __slots__ = ("_cached", "_s")
    window_s: float
    match_by_instance: Callable[[Tokens], tuple[int, dict[str, int]]]
    match_path: Callable[[Tokens], tuple[list[RadixNode], RadixNode | None, int]]
    requests: Callable[[RadixNode, str, float], int]
    lru_nodes: Callable[[str], Iterator[RadixNode]]
    path_tokens: Callable[[RadixNode], Tokens]

    def __init__(self, index: PrefixIndex) -> None:
        self._s = index
        self._cached = MappingProxyType(index.cached_tokens)

    @property
    def cached_tokens(self) -> Mapping[str, int]:
        return self._cached
