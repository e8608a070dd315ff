"""The word tokenizer's chunking (issue 27, item 8): a long text is matched in chunks
(so a thread tokenizing it lets the event loop run) without changing a single id."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.tokenize.words import RESERVED, _chunks, word_ids

texts = st.lists(st.sampled_from(list("ab1 \t\n,.é-_") + ["  ", "word"]), max_size=120).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=texts, chunk=st.integers(1, 40))
def test_chunked_ids_equal_unchunked_ids(text: str, chunk: int) -> None:
    assert word_ids(text, chunk=chunk) == word_ids(text, chunk=10**9)
    assert "".join(_chunks(text, chunk)) == text


def test_a_long_text_is_cut_where_whitespace_follows_a_word() -> None:
    assert _chunks("aaaa bbbb cccc", 3) == ["aaaa", " bbbb", " cccc"]
    assert _chunks("aaaaaaaa", 3) == ["aaaaaaaa"]  # no cut point: one chunk
    assert word_ids("hi there")[0] >= RESERVED
