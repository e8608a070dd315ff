"""The router's estimate of an instance's LoRA slots: the adapters of the last calls sent,
`max_loras` of them, least recently used first out."""

from __future__ import annotations

from flowserve.core.adapters import AdapterBook, adapters_in
from flowserve.types.specs import LoraSpec

SPEC = LoraSpec(("A", "b", "c"), max_loras=2)


def test_holds_the_last_max_loras_adapters_used() -> None:
    book = AdapterBook(SPEC)
    for model in ("a", "b", "a", "c"):  # case-insensitive: 'a' is adapter 'A'
        book.used(model)
    assert book.held == ("A", "c")  # b was the least recently used when c came
    assert book.holds("A") and not book.holds("b")


def test_base_model_calls_use_no_slot() -> None:
    book = AdapterBook(SPEC)
    book.used("llama-3.1-8b")
    book.used(None)
    assert book.held == ()


def test_adapters_in_names_each_adapter_once() -> None:
    assert adapters_in(["b", "B", None, "llama", "c"], SPEC) == {"b", "c"}
