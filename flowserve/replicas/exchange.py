"""One replica's side of the exchange with its peers, sans-IO: what it tells them (its
report, its routed prompts) and what theirs become for its core (events). The live sync
(`flowserve.replicas.sync`, through Redis) and the simulator's replicas
(`flowserve.sim.replicas`, a delay in virtual time) both run this class.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from flowserve.replicas.blocks import DEFAULT_BOOK_BLOCKS, BlockBook, RouteDecoder, RouteEncoder, RouteEntry
from flowserve.replicas.peers import PeerTracker, Report, make_report
from flowserve.types.peers import InstanceLoad, PeerLoad, PeerRouted, PeerService
from flowserve.types.work import Tokens

DEFAULT_ROUTE_TTL_S = 300.0


class Exchange:
    def __init__(self, replica: str, blocks: int = DEFAULT_BOOK_BLOCKS,
                 route_ttl_s: float = DEFAULT_ROUTE_TTL_S) -> None:
        """blocks: the prompt blocks this replica remembers; route_ttl_s: peers' routed
        prompts older than this are not folded in (a routed prompt's tokens are carried
        again after half of it, for replicas that joined since)."""
        self.replica = replica
        self.route_ttl_s = route_ttl_s
        book = BlockBook(blocks)
        self.encoder = RouteEncoder(replica, book, republish_s=route_ttl_s / 2)
        self.decoder = RouteDecoder(book)
        self.tracker = PeerTracker(replica)

    def route(self, instance: str, tokens: Tokens, now: float) -> RouteEntry | None:
        """What to tell the peers of a prompt this replica sent to `instance`."""
        return self.encoder.entry(instance, tokens, now)

    def report(self, now: float, loads: tuple[InstanceLoad, ...], costs: Mapping[str, float], epoch: int = 0,
               pending: int = 0) -> Report:
        return make_report(self.replica, now, loads, costs, epoch, pending)

    def peers(self, now: float, reports: Mapping[str, Report]) -> list[PeerLoad | PeerService]:
        """Every live peer's latest report → events (changes only; a peer missing left)."""
        return self.tracker.apply(now, reports)

    def routes(self, now: float, entries: Iterable[RouteEntry], at: float | None = None) -> list[PeerRouted]:
        """Peers' routed prompts → events (this replica's own and stale ones skipped; ValueError
        for a block that does not hash to its name). `now` is on the entries' clock, `at`
        the events' time (default `now`)."""
        out = []
        for e in entries:
            if e.replica == self.replica or now - e.time > self.route_ttl_s:
                continue
            tokens = self.decoder.tokens(e)
            if tokens:
                out.append(PeerRouted(now if at is None else at, e.instance, tokens))
        return out
