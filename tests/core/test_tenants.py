"""Virtual token counters per tenant (VTC) and the weight parser."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.core.tenants import TenantLedger, parse_weights


def test_counters_charge_prompt_and_output_tokens_over_the_weight() -> None:
    led = TenantLedger({"gold": 3.0})
    led.started("gold", 300)  # 1·300 / 3
    led.finished("gold", 30)  # + 2·30 / 3
    led.started("free", 100)
    assert led.counter("gold") == pytest.approx(120.0)
    assert led.counter("free") == 100.0
    assert led.served["gold"] == {"prompt": 300, "output": 30, "calls": 1}


def test_lift_removes_credit_banked_while_idle() -> None:
    led = TenantLedger()
    led.started("a", 500)
    led.started("b", 800)
    led.lift("c", ["a", "b"])  # c joins: max(0, min(500, 800))
    assert led.counter("c") == 500.0
    led.lift("b", ["a", "b"])  # already ahead: unchanged
    assert led.counter("b") == 800.0
    led.lift("d", [])  # nobody backlogged: unchanged
    assert led.counter("d") == 0.0


def test_parse_weights() -> None:
    assert parse_weights("gold:3, free:1") == {"gold": 3.0, "free": 1.0}
    assert parse_weights("") == {}
    assert parse_weights("team:a:2") == {"team:a": 2.0}
    for bad in ("gold", ":3", "gold:x", "gold:0", "gold:-1", "gold:inf", "gold:nan"):
        with pytest.raises(ValueError, match="tenant weight"):
            parse_weights(bad)


def test_parse_weights_takes_the_mapping_the_docs_show() -> None:
    assert parse_weights({"gold": 3, "free": 1.5}) == {"gold": 3.0, "free": 1.5}
    for bad in ({"gold": 0}, {"gold": -1}, {"gold": True}, {"gold": "3"}, {"": 1}, {3: 1}, {"gold": float("nan")}):
        with pytest.raises(ValueError, match="tenant weight"):
            parse_weights(bad)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_parse_weights_fuzz(text: str) -> None:
    try:
        out = parse_weights(text)
    except ValueError as e:
        assert str(e).startswith("tenant weight")
        return
    assert all(v > 0 and v != float("inf") for v in out.values())
    assert all(k == k.strip() and k for k in out)
