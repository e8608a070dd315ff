"""The one place that updates the host's estimates of its engines' prefix caches.

An engine that publishes no cache events (llama-server, most OpenAI-compatible servers)
is modelled by a `CacheEstimate` (an LRU radix tree of its capacity): each call sent
there is inserted and pinned while it runs, a peer replica's routed prompt and a prompt
the engine's `/slots` says it holds are inserted too, and whatever the model evicts goes
to the core as `PrefixEvicted`, so the router's prefix index forgets it. This object owns
those estimates: it hears instances open and close and calls sent and ended as facts
(`flowserve.host.facts`), and a replica's sync and the `/slots` reader hand it what they
learnt (`peer_routed`, `resident`), which it passes on to the core after its own update.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from flowserve.engines.cache_estimate import CacheEstimate, estimated_sequences
from flowserve.host.facts import CallEnded, CallSent, InstanceClosed, InstanceOpened
from flowserve.host.settings import GatewaySettings
from flowserve.profiles.instance import kv_capacity
from flowserve.types.events import PrefixEvicted
from flowserve.types.kv import SlotsResident
from flowserve.types.peers import PeerRouted

DEFAULT_CACHE_TOKENS = 16_384


class EstimatedCaches:
    def __init__(self, settings: GatewaySettings, put: Callable[[Any], None], clock: Callable[[], float],
                 evicted: Callable[[str, int], None], enabled: bool) -> None:
        """put: the driver's inbox; evicted: counts an instance's evicted tokens (metrics);
        enabled: the core keeps a prefix index to correct (else nothing is estimated)."""
        self._settings = settings
        self._put = put
        self._clock = clock
        self._evicted = evicted
        self._enabled = enabled
        self.estimates: dict[str, CacheEstimate] = {}

    # ------------------------------------------------------------------ facts

    def opened(self, fact: InstanceOpened) -> None:
        spec, s = fact.spec, self._settings
        if not self._enabled or spec.backend == "sim":  # simulated engines report their evictions themselves
            return
        size = s.cache_tokens.get(spec.name) or kv_capacity(spec)
        seqs = estimated_sequences(spec, s.cache_sequences.get(spec.name))
        self.estimates[spec.name] = CacheEstimate(spec.name, size or DEFAULT_CACHE_TOKENS, seqs)

    def closed(self, fact: InstanceClosed) -> None:
        self.estimates.pop(fact.name, None)

    def call_sent(self, fact: CallSent) -> None:
        est = self.estimates.get(fact.instance)
        if est is not None:
            self._report(fact.instance, est.on_send(fact.call.id, fact.call.prompt, fact.time))

    def call_ended(self, fact: CallEnded) -> None:
        est = self.estimates.get(fact.instance)
        if est is not None:
            est.on_end(fact.call_id)

    # ------------------------------------------------------------------ what feeders learnt

    def peer_routed(self, ev: PeerRouted) -> None:
        """A peer replica sent a prompt to one of the instances: cached there too."""
        est = self.estimates.get(ev.instance)
        if est is not None:
            self._report(ev.instance, est.on_peer(ev.tokens, self._clock()))
        self._put(ev)

    def resident(self, ev: SlotsResident) -> None:
        """An engine's `/slots` named the prompts its slots hold."""
        self._put(ev)
        est = self.estimates.get(ev.instance)
        if est is not None:
            for prompt in ev.prompts:
                self._report(ev.instance, est.on_peer(prompt, ev.time))

    def _report(self, instance: str, evicted: Iterable[PrefixEvicted]) -> None:
        for ev in evicted:
            self._evicted(instance, len(ev.tokens) - ev.start)
            self._put(ev)
