"""The one place that updates the estimated caches: calls sent and ended, a peer's routed
prompt and a `/slots` read all go through `EstimatedCaches`, and each eviction is counted
and reaches the core in order with what caused it."""

from __future__ import annotations

from typing import Any

from live_support import ext_spec, sim_spec

from flowserve.host.cache_view import EstimatedCaches
from flowserve.host.facts import CallEnded, CallSent, InstanceClosed, InstanceOpened
from flowserve.host.settings import GatewaySettings
from flowserve.types.events import PrefixEvicted
from flowserve.types.kv import SlotsResident
from flowserve.types.peers import PeerRouted
from flowserve.types.work import LLMCall


class Seen:
    def __init__(self) -> None:
        self.put: list[Any] = []
        self.evicted: list[tuple[str, int]] = []


def caches(enabled: bool = True) -> tuple[EstimatedCaches, Seen]:
    seen = Seen()
    c = EstimatedCaches(GatewaySettings(cache_tokens={"e": 100}), seen.put.append, lambda: 5.0,
                        lambda name, n: seen.evicted.append((name, n)), enabled)
    c.opened(InstanceOpened(0.0, ext_spec("e"), object()))  # type: ignore[arg-type]
    return c, seen


def sent(call_id: int, prompt: tuple[int, ...], now: float) -> CallSent:
    return CallSent(now, LLMCall(call_id, call_id, "n", "s", "w", prompt, 4, 4), "e", None)


def test_calls_fill_the_estimate_and_its_evictions_are_counted_and_sent() -> None:
    c, seen = caches()
    c.call_sent(sent(1, tuple(range(60)), 1.0))
    c.call_ended(CallEnded(2.0, 1, "e", None, True))  # unpinned: evictable
    c.call_sent(sent(2, tuple(range(100, 160)), 3.0))  # 120 > 100 tokens: the older prompt goes
    (ev,) = seen.put
    assert isinstance(ev, PrefixEvicted) and ev.tokens == tuple(range(60)) and ev.start == 0
    assert seen.evicted == [("e", 60)] and c.estimates["e"].evicted_tokens == 60


def test_a_peers_prompt_evicts_before_it_reaches_the_core() -> None:
    c, seen = caches()
    c.call_sent(sent(1, tuple(range(80)), 1.0))
    c.call_ended(CallEnded(2.0, 1, "e", None, True))
    routed = PeerRouted(3.0, "e", tuple(range(200, 240)))
    c.peer_routed(routed)
    assert [type(x) for x in seen.put] == [PrefixEvicted, PeerRouted] and seen.put[1] is routed
    assert seen.evicted == [("e", 80)]


def test_a_slots_read_reaches_the_core_then_tops_the_estimate_up() -> None:
    c, seen = caches()
    c.call_sent(sent(1, tuple(range(80)), 1.0))
    c.call_ended(CallEnded(2.0, 1, "e", None, True))
    read = SlotsResident(3.0, "e", (tuple(range(300, 340)),))
    c.resident(read)
    assert seen.put[0] is read and [type(x) for x in seen.put[1:]] == [PrefixEvicted]
    assert c.estimates["e"].size == 40


def test_no_estimate_without_a_prefix_index_for_simulated_engines_or_once_closed() -> None:
    off, seen = caches(enabled=False)
    off.call_sent(sent(1, tuple(range(500)), 1.0))
    assert off.estimates == {} and seen.put == []
    c, _ = caches()
    c.opened(InstanceOpened(0.0, sim_spec("s"), object()))  # type: ignore[arg-type]
    assert set(c.estimates) == {"e"}  # a simulated engine reports its own evictions
    c.closed(InstanceClosed(1.0, "e"))
    assert c.estimates == {}
