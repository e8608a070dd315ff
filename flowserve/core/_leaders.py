"""Shared-prefix prefills: one leader computes a long uncached prefix, its followers wait.

When the core binds a call whose prompt has a long prefix its instance does not cache,
that call becomes the prefix's *leader*. A call the dispatch policy would send to another
instance that does not cache that prefix, while the leader's prefill runs, does not start
a second copy of it there: it waits as a *follower* (WAITING) and is dispatched again
once the leader's prefill has filled its engine's cache (`PrefillDone`) — or once the
leader left its engine for any reason — when the policy sees the prefix cached there.
What instances cache comes from the router's prefix index, so leaders exist only when
the core keeps one. SGLang handles the
same within one engine batch (sgl-project/sglang, `schedule_policy.py`, in-batch prefix
caching: a request whose prefix another request of the batch is computing waits a
round); here it spans instances, so every workload gets it.

A prefix is long when it is at least `min_tokens` and at least `min_share` of the
follower's prompt: waiting pays only when the shared part dominates its prefill.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from flowserve.core.state import CallState
from flowserve.types.work import Tokens


@dataclass(frozen=True)
class PrefillSharing:
    """When a call waits for another's prefill (`SchedulerCore(prefill_sharing=...)`)."""

    min_tokens: int = 256
    min_share: float = 0.5

    def __post_init__(self) -> None:
        assert self.min_tokens >= 1 and 0.0 <= self.min_share <= 1.0


DEFAULT_SHARING = PrefillSharing()


def shares_prefix(a: Tokens, b: Tokens, n: float) -> bool:
    """Do two token tuples share their first n tokens? One slice comparison (it runs in C),
    where finding the common prefix's length would take log₂(len) of them."""
    k = math.ceil(n)
    return len(a) >= k and len(b) >= k and a[:k] == b[:k]


class PrefillLeaders:
    def __init__(self, sharing: PrefillSharing) -> None:
        self.sharing = sharing
        self._by_head: dict[Tokens, list[CallState]] = {}  # the prompt's first min_tokens → leaders
        self._followers: dict[int, list[CallState]] = {}  # leader id → waiting followers
        self._leader_of: dict[int, CallState] = {}  # follower id → its leader

    def __len__(self) -> int:
        return len(self._leader_of)

    def lead(self, cs: CallState, uncached: int) -> None:
        """The call was just bound to an instance with `uncached` prompt tokens to compute."""
        assert cs.call is not None
        if uncached < self.sharing.min_tokens or cs.id in self._followers:
            return
        head = cs.call.prompt[: self.sharing.min_tokens]
        self._by_head.setdefault(head, []).append(cs)
        self._followers[cs.id] = []

    def follow(self, cs: CallState, target: str, cached: int) -> CallState | None:
        """The leader `cs` should wait for rather than go to `target` (which caches `cached`
        of its prompt tokens), and `cs` joins its followers; or None."""
        assert cs.call is not None
        prompt, k = cs.call.prompt, self.sharing.min_tokens
        if len(prompt) <= k:
            return None
        leaders = self._by_head.get(prompt[:k])
        if not leaders:
            return None
        need = max(k, self.sharing.min_share * len(prompt), cached + k)
        for leader in leaders:
            assert leader.call is not None
            if leader.instance == target or leader.node.model != cs.node.model:
                continue  # the same engine shares the prefix in its batch
            if shares_prefix(leader.call.prompt, prompt, need):
                self._followers[leader.id].append(cs)
                self._leader_of[cs.id] = leader
                return leader
        return None

    def done(self, leader: CallState) -> list[CallState]:
        """The leader's prefill is done (or it left its engine): its followers, in order."""
        followers = self._followers.pop(leader.id, None)
        if followers is None:
            return []
        assert leader.call is not None
        head = leader.call.prompt[: self.sharing.min_tokens]
        peers = self._by_head[head]
        peers.remove(leader)
        if not peers:
            del self._by_head[head]
        for f in followers:
            del self._leader_of[f.id]
        return followers

    def forget(self, follower: CallState) -> None:
        """A waiting follower's query ended."""
        leader = self._leader_of.pop(follower.id, None)
        if leader is not None:
            self._followers[leader.id].remove(follower)

    def leaders(self) -> Iterator[CallState]:
        for group in self._by_head.values():
            yield from group
