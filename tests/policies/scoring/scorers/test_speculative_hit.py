"""`speculative_hit` and the view's split of what an instance caches into confirmed and
speculative blocks, on the core's own book of the engines' cache events."""

from __future__ import annotations

import pytest
from scoring_helpers import call, harness_with

from flowserve.cache.block_index import prompt_block_hashes
from flowserve.core._kv import KVBook, KVSettings
from flowserve.core.harness import PolicyHarness
from flowserve.core.state import InstanceState
from flowserve.core.view import ClusterView
from flowserve.policies.scoring.plugin import Decision
from flowserve.policies.scoring.scorers.prefix_hit import PrefixHit
from flowserve.policies.scoring.scorers.speculative_hit import SpeculativeHit
from flowserve.profiles.predictor import OutputPredictor
from flowserve.types.kv import BlockStored, KVViewChanged
from flowserve.types.specs import InstanceSpec, KVEventsSpec

B = 16
PROMPT = tuple(range(1000, 1000 + 8 * B))  # 8 blocks


def precise_harness() -> tuple[PolicyHarness, ClusterView, KVBook, list[InstanceState]]:
    """Instances a (precise: publishes events) and b (estimated) with the core's KV book."""
    h, (a, b) = harness_with(["a", "b"])
    book = KVBook(h.prefix_index, KVSettings(speculative_ttl_s=10.0))
    a.spec = InstanceSpec("a", "A100-80G", "llama-3.1-8b", kv_events=KVEventsSpec("tcp://x", block_size=B))
    book.add(a.spec)
    book.on_view(KVViewChanged(0.0, "a", True, "complete"))
    view = ClusterView({"a": a, "b": b}, OutputPredictor(), {}, h.prefix_index, h.tenants.shares, book)
    return h, view, book, [a, b]


def test_confirmed_blocks_then_routed_ones_within_the_ttl() -> None:
    h, view, book, (a, b) = precise_harness()
    hashes = prompt_block_hashes(PROMPT, B)
    # the engine stored the first 3 blocks; then a prompt of all 8 was routed to a at t = 0
    book.index.stored("a", BlockStored(0, tuple(hashes[:3]), None, PROMPT[:3 * B], B), 0.0)
    routed = call(PROMPT)
    h.prefix_index.add(PROMPT, "a", 0.0)
    book.routed(routed.call, "a", 0.0)
    h.prefix_index.add(PROMPT, "b", 0.0)  # b: the estimate says it caches it all
    cs = call(PROMPT + (7,))
    view.advance(4.0)
    view.next_decision()
    assert view.cache_split(cs, a) == (3 * B, 5 * B)
    assert view.cache_split(cs, a, max_age_s=3.0) == (3 * B, 0)  # routed 4 s ago: too old for a 3 s TTL
    assert view.cache_split(cs, b) == (8 * B, 0)  # no events: the estimate is all there is
    d = Decision(cs, [a, b], view)
    total = len(cs.call.prompt)
    assert SpeculativeHit().score(d) == [5 * B / total, 0.0]
    assert SpeculativeHit(ttl_s=3.0).score(d) == [0.0, 0.0]
    assert PrefixHit(speculative=False).score(d) == [3 * B / total, 8 * B / total]
    assert PrefixHit().score(d) == [8 * B / total, 8 * B / total]


def test_refuses_a_ttl_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="ttl_s"):
        SpeculativeHit(ttl_s=0.0)
