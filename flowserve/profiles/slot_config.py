"""How a llama-server instance keeps prompts between requests (its slots), as a profile
records it so the simulator can model the engine that is really deployed.

llama-server (tools/server/server-context.cpp) runs `-np` slots; each keeps the KV of its
last request after it finishes. A new request goes to the idle slot whose kept prompt
shares the longest common prefix with it, as a fraction of the new prompt, if that
fraction exceeds `--slot-prompt-similarity` (default 0.1); else to the least recently used
idle slot. `--kv-unified` lets the slots share all `-c` cells (idle slots are purged when
a request needs room); without it each slot owns `-c / -np` cells. `--cache-ram MIB`
(default 8192, 0 disables) keeps the states of slots about to be overwritten in host RAM
and restores the best one into the slot a request lands in; with it, `--cache-idle-slots`
(default on) also saves every idle slot whenever a request starts, and with `--kv-unified`
clears them, so reuse then goes through the RAM cache.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SIMILARITY = 0.1  # llama-server's --slot-prompt-similarity default


@dataclass(frozen=True, slots=True)
class SlotConfig:
    kv_unified: bool = True
    # tokens the host-RAM prompt cache holds: None = unbounded (the default 8 GiB is
    # millions of tokens of a small model), 0 = --cache-ram 0
    cache_ram_tokens: int | None = None
    similarity: float = DEFAULT_SIMILARITY
    cache_idle_slots: bool = True  # without a RAM cache llama-server turns it off

    def __post_init__(self) -> None:
        assert self.cache_ram_tokens is None or self.cache_ram_tokens >= 0
        assert 0.0 <= self.similarity <= 1.0

    def to_dict(self) -> dict[str, object]:
        return {"kv_unified": self.kv_unified, "cache_ram_tokens": self.cache_ram_tokens,
                "slot_prompt_similarity": self.similarity, "cache_idle_slots": self.cache_idle_slots}


def cache_ram_tokens(cache_ram_mib: int | None, kv_bytes_per_token: int | None, min_tokens: int) -> int | None:
    """Tokens `--cache-ram MIB` holds: 0 stays 0 (disabled), unknown sizes are unbounded;
    llama-server keeps at least `min_tokens` (its context) whatever the byte limit."""
    if cache_ram_mib == 0:
        return 0
    if cache_ram_mib is None or cache_ram_mib < 0 or not kv_bytes_per_token:
        return None
    return max(min_tokens, cache_ram_mib * 2**20 // kv_bytes_per_token)
