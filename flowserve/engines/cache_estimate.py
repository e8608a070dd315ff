"""An estimate of a real engine's prefix cache, so the router's index can forget.

Real engines do not report evictions. The driver models each instance's cache as an LRU
radix tree of `capacity` tokens (vLLM/SGLang: KV blocks; llama-server with `-np N
--cache-ram 0`: its slots, about `-c` tokens in all with `--kv-unified`): every prompt
sent there is inserted, running prompts are pinned, and when the model exceeds the
capacity its least recently used unpinned prefixes are evicted and reported to the core
as `PrefixEvicted`. It is an estimate: the engine's own policy (slot choice, block
granularity) may keep or drop other tokens, which only costs routing quality, never
correctness — the engine reports the cached tokens it really used.
"""

from __future__ import annotations

from flowserve.cache.radix import RadixNode, RadixTree
from flowserve.types.events import PrefixEvicted
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import Tokens


def estimated_sequences(spec: InstanceSpec, configured: int | None = None) -> int | None:
    """How many cached prompts the estimate keeps for an instance: the gateway's
    `cache_sequences` for it, else its fitted profile's slots (llama-server keeps one
    prompt per slot), else no bound."""
    if configured:
        return configured
    return spec.profile.slots if spec.profile is not None else None


class CacheEstimate:
    def __init__(self, instance: str, capacity_tokens: int, max_sequences: int | None = None) -> None:
        assert capacity_tokens > 0 and (max_sequences is None or max_sequences > 0)
        self.instance = instance
        self.capacity = capacity_tokens
        self.max_sequences = max_sequences  # llama-server: its slots, each caching one sequence
        self.tree = RadixTree()
        self._pinned: dict[int, RadixNode] = {}
        self.evicted_tokens = 0

    def on_send(self, call_id: int, prompt: Tokens, now: float) -> list[PrefixEvicted]:
        """The call's prompt is now (being) cached on the instance; pin it while it runs."""
        if call_id in self._pinned:
            self.tree.release(self._pinned.pop(call_id))
        node, _ = self.tree.insert(prompt, now)
        self.tree.acquire(node)
        self._pinned[call_id] = node
        return self._shrink(now)

    def on_peer(self, prompt: Tokens, now: float) -> list[PrefixEvicted]:
        """Another replica sent this prompt to the instance: it is cached there too."""
        self.tree.insert(prompt, now)
        return self._shrink(now)

    def on_end(self, call_id: int) -> None:
        node = self._pinned.pop(call_id, None)
        if node is not None:
            self.tree.release(node)

    def _shrink(self, now: float) -> list[PrefixEvicted]:
        out: list[PrefixEvicted] = []

        def report(node: RadixNode) -> None:
            start = node.depth - len(node.key)
            out.append(PrefixEvicted(now, self.instance, self.tree.path_tokens(node), start))

        over = self.tree.size - self.capacity
        if over > 0:
            self.evicted_tokens += self.tree.evict(over, report)
        if self.max_sequences is not None:
            while self._leaves() > self.max_sequences:
                freed = self.tree.evict(1, report)  # the least recently used whole leaf
                if not freed:
                    break  # the rest is running
                self.evicted_tokens += freed
        return out

    def _leaves(self) -> int:
        return sum(1 for n in self.tree.nodes() if not n.children)

    @property
    def size(self) -> int:
        return self.tree.size
