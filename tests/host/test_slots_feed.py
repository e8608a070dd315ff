"""What a /slots read hands the core: the prompts of the slots that changed, once."""

from __future__ import annotations

from flowserve.engines.llamacpp_slots import SlotState
from flowserve.host.slots_feed import changed_prompts, names_no_prompt


def test_only_changed_slots_are_handed_on() -> None:
    seen: dict[int, str] = {}
    first = [SlotState(0, 64, False, "a b"), SlotState(1, 64, True, "c"), SlotState(2, 64, False)]
    assert changed_prompts(first, seen) == ["a b", "c"]
    assert changed_prompts(first, seen) == []  # read again: nothing new
    assert changed_prompts([SlotState(0, 64, False, "a b"), SlotState(1, 64, False, "d")], seen) == ["d"]
    assert seen == {0: "a b", 1: "d"}


def test_slots_that_ran_prompts_but_name_none_tell_sizes_only() -> None:
    assert not names_no_prompt([SlotState(0, 64, False)])  # nothing ran yet: no verdict
    assert names_no_prompt([SlotState(0, 64, False, None, 12), SlotState(1, 64, False)])
    assert not names_no_prompt([SlotState(0, 64, False, "x", 12)])
