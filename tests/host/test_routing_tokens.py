"""Tokenization never depends on one unhealthy engine (issue 27, item 6): only engines
of up instances with a closed circuit tokenize, and one that answers an error hands the
text to the next."""

from __future__ import annotations

import dataclasses

import pytest
from live_support import MODEL, ext_spec, run

from flowserve.core.records import InstanceStatus
from flowserve.engines.backend import EngineError
from flowserve.graph.prompt import Toks, as_chat
from flowserve.host.routing_tokens import GatewayTokens


class Tok:
    def __init__(self, name: str, error: EngineError | None = None) -> None:
        self.name, self.error, self.asked = name, error, 0

    async def encode(self, text: str) -> list[int]:
        self.asked += 1
        if self.error is not None:
            raise self.error
        return [len(text), len(self.name)]


def tokens(toks: dict[str, Tok], up: dict[str, bool], circuits: dict[str, str]) -> GatewayTokens:
    status = [InstanceStatus(n, ext_spec(n), up[n], 0, 0, 0.0, 0, 0) for n in toks]
    return GatewayTokens(lambda: status, toks.get, circuits.get, {})


def test_only_up_instances_with_a_closed_circuit_tokenize() -> None:
    toks = {"down": Tok("down"), "open": Tok("open"), "half": Tok("half"), "ok": Tok("okay")}
    gt = tokens(toks, {"down": False, "open": True, "half": True, "ok": True},
                {"down": "closed", "open": "open", "half": "half_open", "ok": "closed"})
    assert gt.tokenizers(MODEL) == [toks["ok"]]
    assert run(gt.text("abc", MODEL)) == [3, 4]
    assert [t.asked for t in toks.values()] == [0, 0, 0, 1]


@pytest.mark.parametrize("retryable", [True, False])
def test_an_engine_answering_an_error_hands_the_text_to_the_next(retryable: bool) -> None:
    bad = Tok("bad", EngineError("engine error 404: no /tokenize", retryable=retryable, status=404))
    good = Tok("good")
    gt = tokens({"bad": bad, "good": good}, {"bad": True, "good": True}, {"bad": "closed", "good": "closed"})
    assert run(gt.text("abcd", MODEL)) == [4, 4]
    assert bad.asked == good.asked == 1


def test_when_every_engine_fails_the_first_error_is_raised() -> None:
    a = Tok("a", EngineError("a refused", retryable=True))
    b = Tok("b", EngineError("b refused", retryable=True))
    gt = tokens({"a": a, "b": b}, {"a": True, "b": True}, {"a": "closed", "b": "closed"})
    with pytest.raises(EngineError, match="a refused"):
        run(gt.text("x", MODEL))


def test_a_chat_carries_its_ids_into_the_core_and_nothing_is_asked_again() -> None:
    tok = Tok("engine")
    gt = tokens({"e": tok}, {"e": True}, {"e": "closed"})
    chat = as_chat([{"role": "user", "content": "hello"}])
    assert gt.encode((chat,), MODEL) is None  # a real engine renders chats: the core must ask (Tokenize)
    carried = dataclasses.replace(chat, ids=(5, 6, 7))
    assert gt.encode((carried,), MODEL) == (5, 6, 7)  # the request's ids, as the gateway tokenized them
    assert run(gt.prompt((carried, Toks((8,))), MODEL)) == (5, 6, 7, 8)
    assert tok.asked == 0
