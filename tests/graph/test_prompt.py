"""Prompt parts are consumed through one visitor per consumer: every kind of part calls
its own method, a visitor that misses a kind cannot be built, and the token estimate,
the simulator's tokenizer and the default tokenizer answer each kind as specified."""

from __future__ import annotations

import typing

import pytest

from flowserve.graph.prompt import Chat, Lit, Out, Part, PartVisitor, Segment, Toks, as_chat, estimate_tokens
from flowserve.tokenize.prompts import NoText, SimTokenizer


class Names(PartVisitor[str]):
    def lit(self, p: Lit) -> str:
        return "lit"

    def segment(self, p: Segment) -> str:
        return "segment"

    def out(self, p: Out) -> str:
        return "out"

    def toks(self, p: Toks) -> str:
        return "toks"

    def chat(self, p: Chat) -> str:
        return "chat"


PARTS = [Lit("hello world"), Segment(7, 5), Out("plan"), Toks((1, 2, 3)), as_chat([{"role": "user", "content": "hi"}])]


def test_every_kind_of_part_calls_its_own_method():
    assert {type(p) for p in PARTS} == set(typing.get_args(Part))
    assert [p.accept(Names()) for p in PARTS] == ["lit", "segment", "out", "toks", "chat"]


def test_a_visitor_missing_a_kind_cannot_be_built():
    class NoChat(PartVisitor[int]):
        def lit(self, p): return 0
        def segment(self, p): return 0
        def out(self, p): return 0
        def toks(self, p): return 0

    with pytest.raises(TypeError, match="chat"):
        NoChat()


def test_token_estimate_by_hand():
    # "hello world" 11 chars → 11 // 4 + 1 = 3; a segment its length; ids their count; Out 0
    assert estimate_tokens((Lit("hello world"), Segment(7, 5), Out("x"), Toks((1, 2, 3)))) == 3 + 5 + 0 + 3
    chat = as_chat([{"role": "user", "content": "hi"}])  # "hi" → 1, + 4 framing, tools "[]" → 0
    assert estimate_tokens((chat,)) == 5
    assert estimate_tokens((Chat(chat.turns, ids=(9,) * 40),)) == 40  # known ids are exact


def test_the_default_tokenizer_declines_text_but_not_ids():
    tok = NoText()
    assert tok.encode((Toks((1, 2)), Segment(3, 2)), None) == (1, 2, -4, 0)
    assert tok.encode((Toks((1,)), Lit("x")), None) is None
    chat = as_chat([{"role": "user", "content": "hi"}])
    assert tok.encode((chat,), None) is None
    assert tok.encode((Chat(chat.turns, ids=(4, 5)),), None) == (4, 5)


def test_the_simulators_tokenizer_answers_every_resolved_part():
    tok = SimTokenizer()
    ids = tok.encode((Lit("a b"), Segment(1, 3), Toks((42,))), None)
    assert ids[-4:] == (-2, 0, 0, 42) and len(ids) == 2 + 3 + 1
    assert tok.encode((Segment(1, 2), Segment(2, 1)), None) == (-2, 0, -3)
    with pytest.raises(AssertionError, match="resolves Out parts"):
        tok.encode((Out("plan"), Toks((1,))), None)
