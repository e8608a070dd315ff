"""llama-server's /slots answers, read as plain data; whatever arrives gives slots or SlotsError."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.engines.llamacpp_slots import SlotsError, SlotState, parse_slots

# as the cached llama-server build answers with LLAMA_SERVER_SLOTS_DEBUG=1 (params trimmed)
REAL = [
    {"id": 0, "n_ctx": 4096, "speculative": False, "is_processing": False, "id_task": 5, "n_prompt_tokens": 24,
     "n_prompt_tokens_processed": 0, "n_prompt_tokens_cache": 0, "params": {"seed": 4294967295},
     "next_token": [{"has_next_token": False, "n_remain": -1, "n_decoded": 0}],
     "prompt": "user: hello there, how are you\nassistant:", "generated": "39 answer"},
    {"id": 1, "n_ctx": 4096, "speculative": False, "is_processing": True},
]


def test_a_real_answer() -> None:
    assert parse_slots(REAL) == [SlotState(0, 4096, False, "user: hello there, how are you\nassistant:", 24),
                                 SlotState(1, 4096, True)]
    without = [{k: v for k, v in REAL[0].items() if k not in ("prompt", "generated")}]
    assert parse_slots(without) == [SlotState(0, 4096, False, None, 24)]  # without the debug variable


@pytest.mark.parametrize("body, says", [
    ({"error": "x"}, "JSON array"), ([3], "object"), ([{"id": -1, "n_ctx": 1}], "id"),
    ([{"id": 0}], "n_ctx"), ([{"id": 0, "n_ctx": True}], "n_ctx"),
    ([{"id": 0, "n_ctx": 1, "is_processing": "yes"}], "is_processing"),
    ([{"id": 0, "n_ctx": 1, "prompt": [1, 2]}], "prompt"),
    ([{"id": 0, "n_ctx": 1}, {"id": 0, "n_ctx": 1}], "twice"),
])
def test_bad_answers_are_refused_with_the_reason(body: object, says: str) -> None:
    with pytest.raises(SlotsError, match=says):
        parse_slots(body)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                 max_size=4), max_leaves=12)
SLOT = st.fixed_dictionaries({"id": st.integers(-2, 5), "n_ctx": st.integers(-1, 9000)},
                             optional={"is_processing": st.booleans() | JSON, "prompt": st.text() | JSON,
                                       "n_prompt_tokens": st.integers(-1, 99) | JSON, "params": JSON})


@settings(max_examples=300, deadline=None)
@given(st.lists(SLOT, max_size=4) | JSON)
def test_whatever_arrives_gives_slots_or_slots_error(body: object) -> None:
    try:
        slots = parse_slots(body)
    except SlotsError:
        return
    assert len({s.id for s in slots}) == len(slots)
    assert all(s.id >= 0 and s.n_ctx >= 0 and (s.prompt is None or isinstance(s.prompt, str)) for s in slots)
