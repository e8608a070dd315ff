"""The planner's engine model on hand-computed examples: calls of one prefix group
admitted in one iteration each compute the prefix; a call that waits for another's
prefill hits it; the in-batch wait; LRU eviction; several instances."""

from __future__ import annotations

from flowserve.sql.engine_model import Call, EngineShape, estimate_send


class LinearCost:
    """iteration = 10 ms + 1 ms per prefilled token (decode steps: 10 ms)."""

    def iteration_time(self, prefill_tokens: int, prefill_attended: float, decode_seqs: int,
                       decode_context: float) -> float:
        return 0.01 + 0.001 * prefill_tokens


SHARED = (("i", 10), ("f:a", 20))


def shape(**kw: int) -> EngineShape:
    args = {"instances": 1, "max_num_seqs": 256, "token_budget": 2048, "kv_tokens": 10_000} | kw
    return EngineShape(cost=LinearCost(), **args)  # type: ignore[arg-type]


def test_a_group_admitted_in_one_iteration_computes_its_prefix_per_call() -> None:
    calls = [Call((*SHARED, ("u1", 5)), 1), Call((*SHARED, ("u2", 5)), 1)]
    e = estimate_send(calls, shape())
    # one iteration prefills 35 + 35 tokens: 10 ms + 70 ms; nothing was cached at admission
    assert (e.hit_tokens, round(e.time_s, 6), e.prompt_tokens) == (0, 0.08, 70)


def test_a_call_released_after_its_leaders_prefill_hits_the_prefix() -> None:
    calls = [Call((*SHARED, ("u1", 5)), 1), Call((*SHARED, ("u2", 5)), 1, after=0)]
    e = estimate_send(calls, shape())
    # iteration 1: 35 tokens (45 ms); iteration 2: 5 uncached tokens (15 ms)
    assert (e.hit_tokens, round(e.time_s, 6)) == (30, 0.06)
    assert e.hit_rate == 30 / 70


def test_one_slot_serialises_and_the_second_call_hits() -> None:
    calls = [Call((*SHARED, ("u1", 5)), 1), Call((*SHARED, ("u2", 5)), 1)]
    assert estimate_send(calls, shape(max_num_seqs=1)).hit_tokens == 30


def test_a_waiting_call_waits_for_a_long_shared_prefix_in_prefill() -> None:
    # budget 8: the shared 30 tokens ≥ 0 cached + 8, so the second waits instead of computing them
    calls = [Call((*SHARED, ("u1", 5)), 1), Call((*SHARED, ("u2", 5)), 1)]
    assert estimate_send(calls, shape(token_budget=8)).hit_tokens == 30


def test_lru_eviction_and_no_cache() -> None:
    other = Call((("j", 40),), 1)
    calls = [Call((*SHARED, ("u1", 5)), 1), other, Call((*SHARED, ("u2", 5)), 1)]
    assert estimate_send(calls, shape(max_num_seqs=1)).hit_tokens == 30
    # room for 40 tokens: the other call's prompt evicts the group's prefix
    assert estimate_send(calls, shape(max_num_seqs=1, kv_tokens=40)).hit_tokens == 0
    assert estimate_send(calls, shape(max_num_seqs=1, kv_tokens=0)).hit_tokens == 0


def test_instances_take_every_nth_call_with_caches_of_their_own() -> None:
    calls = [Call((*SHARED, (f"u{k}", 5)), 1) for k in range(4)]
    # two instances, one slot each: calls 0, 2 on one and 1, 3 on the other; the second of each hits
    e = estimate_send(calls, shape(instances=2, max_num_seqs=1))
    assert e.hit_tokens == 60 and round(e.time_s, 6) == 0.06


def test_llama_server_slots_keep_only_their_last_prompt() -> None:
    """One slot, calls X (S+a), Y (T+b), Z (S+c): a shared cache still holds S for Z; a
    llama-server slot without a RAM cache holds Y's prompt only."""
    calls = [Call((*SHARED, ("a", 5)), 1), Call((("t", 30), ("b", 5)), 1), Call((*SHARED, ("c", 5)), 1)]
    assert estimate_send(calls, shape(max_num_seqs=1)).hit_tokens == 30
    assert estimate_send(calls, shape(max_num_seqs=1, slot_similarity=0.1)).hit_tokens == 0
    # grouped, Z right after X: the slot still holds S
    grouped = [calls[0], calls[2], calls[1]]
    assert estimate_send(grouped, shape(max_num_seqs=1, slot_similarity=0.1)).hit_tokens == 30


def test_llama_server_picks_the_slot_that_holds_the_prefix() -> None:
    # two slots: X and Y fill them; Z (S+c) takes the slot that kept X's prompt (similarity 30/35)
    calls = [Call((*SHARED, ("a", 5)), 1), Call((("t", 30), ("b", 5)), 1), Call((*SHARED, ("c", 5)), 1, after=0)]
    assert estimate_send(calls, shape(max_num_seqs=2, slot_similarity=0.5)).hit_tokens == 30
