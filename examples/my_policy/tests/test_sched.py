"""EarliestFinish against hand-computed examples, on a cluster state built by hand."""

from __future__ import annotations

import pytest
from my_policy.sched import EarliestFinish, finish_time

from flowserve import CallState, InstanceState, LLMCall, PolicyHarness
from flowserve.cache.prefix_index import PrefixIndex
from flowserve.policies.fcfs import FCFS
from flowserve.profiles.cost_model import cost_model_for
from flowserve.types.specs import InstanceSpec

PROMPT = tuple(range(2000))


def instance(name: str, gpu: str) -> InstanceState:
    return InstanceState(InstanceSpec(name, gpu, "llama-3.1-8b"), cost_model_for(gpu, "llama-3.1-8b"), FCFS())


def call(prompt: tuple[int, ...] = PROMPT, out: int = 64) -> CallState:
    """A tokenized call as the core holds it (its query is not read by this policy)."""
    return CallState.of(LLMCall(1, 1, "n", "s", "w", prompt, out, out))


def test_finish_time_by_hand() -> None:
    assert finish_time(5.0, 1.0) == 6.0
    assert finish_time(0.0, 2.5) == 2.5


def test_a_shorter_queue_beats_faster_hardware_only_when_it_finishes_earlier() -> None:
    fast, slow = instance("fast", "A100-80G"), instance("slow", "L4")
    h = PolicyHarness([fast, slow], prefix_index=PrefixIndex())
    cs = call()
    t_fast, t_slow = h.view.t_comp(cs, fast), h.view.t_comp(cs, slow)
    assert t_fast < t_slow
    fast.outstanding = t_slow - t_fast + 1.0  # fast finishes 1 s later than idle slow
    assert EarliestFinish().choose(cs, h.candidates(), h.view) is slow
    fast.outstanding = t_slow - t_fast - 1.0  # now 1 s earlier
    assert EarliestFinish().choose(cs, h.candidates(), h.view) is fast


def test_a_cached_prefix_lowers_the_finish() -> None:
    a, b = instance("a", "A100-80G"), instance("b", "A100-80G")
    index = PrefixIndex()
    h = PolicyHarness([a, b], prefix_index=index)
    index.add(PROMPT[:1900], "b", 0.0)
    assert EarliestFinish().choose(call(), h.candidates(), h.at(1.0)) is b


def test_parameters_are_validated() -> None:
    with pytest.raises(ValueError, match="tie_break"):
        EarliestFinish(tie_break="random")
