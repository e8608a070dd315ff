"""Profiles: the YAML, precise errors, parameters set per part, shipped profiles, and a fuzzed parser."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.errors import ConfigError
from flowserve.policies.scoring.profile import (
    SHIPPED,
    PartSpec,
    load_profile,
    looks_like_path,
    parse_profile,
    shipped_names,
    shipped_profile,
    with_params,
)

GOOD = {"name": "mine", "filters": ["healthy", {"name": "fits_context", "with_output": True}],
        "scorers": [{"name": "finish", "weight": 1}, {"name": "prefix_hit", "weight": 2, "block_size": 64}],
        "picker": {"name": "top_k_random", "k": 2}, "guards": ["pin"], "prefix_window_s": 0}


def test_a_profile_from_its_mapping() -> None:
    spec = parse_profile(GOOD, "test")
    assert spec.name == "mine" and spec.prefix_window_s == 0.0 and spec.shares_prefills
    assert spec.scorers == (PartSpec("finish", {}, 1.0), PartSpec("prefix_hit", {"block_size": 64}, 2.0))
    assert spec.filters[1] == PartSpec("fits_context", {"with_output": True})
    assert spec.picker == PartSpec("top_k_random", {"k": 2}) and spec.guards == (PartSpec("pin"),)
    assert parse_profile(spec.describe(), "again") == spec  # describe() writes what rebuilds it


def test_a_profile_file(tmp_path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("scorers:\n  - {name: queue_depth, weight: 2}\n  - kv_free\n")
    spec = load_profile(str(f))
    assert spec.name == "p" and [s.name for s in spec.scorers] == ["queue_depth", "kv_free"]
    assert spec.picker.name == "max_score" and not spec.filters
    assert load_profile({"scorers": ["kv_free"]}).name == "inline"


@pytest.mark.parametrize(("data", "message"), [
    ({}, "scorers: required field is missing"),
    ({"scorers": []}, "scorers: List should have at least 1 item"),
    ({"scorers": ["nope"]}, r"scorers\[0\]: unknown scorer 'nope'; known: finish"),
    ({"scorers": [{"weight": 2}]}, r"scorers\[0\]: expected a 'name'"),
    ({"scorers": [{"name": "kv_free", "weight": -1}]}, r"scorers\[0\]: weight must be a finite number ≥ 0"),
    ({"scorers": [{"name": "kv_free", "weight": True}]}, "weight must be a finite number"),
    ({"scorers": [{"name": "prefix_hit", "blok_size": 64}]},
     r"scorers\[0\] \(scorer 'prefix_hit'\) has no parameter 'blok_size' \(parameters: block_size, speculative\)"),
    ({"scorers": [{"name": "prefix_hit", "block_size": 0}]}, r"scorers\[0\] \(scorer 'prefix_hit'\): block_size"),
    ({"scorers": [{"name": "prefix_hit", "block_size": "big"}]}, "'block_size' expects int, got 'big'"),
    ({"scorers": ["kv_free"], "filters": ["kv_free"]}, r"filters\[0\]: unknown filter 'kv_free'"),
    ({"scorers": ["kv_free"], "picker": {"name": "max_score", "weight": 2}}, "picker: only scorers take a weight"),
    ({"scorers": ["kv_free", "kv_free"]}, "'kv_free' appears twice"),
    ({"scorers": [{"name": "kv_free", "classes": ["bulk"]}]},
     r"scorers\[0\]: classes must name some of \['interactive', 'batch'\], got \['bulk'\]"),
    ({"scorers": [{"name": "kv_free", "classes": []}]}, r"scorers\[0\]: classes must name some of"),
    ({"scorers": ["kv_free"], "picker": {"name": "max_score", "classes": ["batch"]}},
     "picker: the picker serves every call"),
    ({"scorers": ["kv_free"], "wieght": 1}, "wieght: unknown field"),
    ({"scorers": ["kv_free"], "prefix_window_s": -1}, "prefix_window_s: Input should be greater than or equal"),
    ({"scorers": ["kv_free"], "guards": [3]}, r"guards\[0\]: expected a guard's name or a mapping with 'name', got 3"),
    ({"scorers": "kv_free"}, "scorers: Input should be a valid list"),
    ([1, 2], "expected a mapping"),
])
def test_bad_input_is_a_precise_error(data: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_profile(data, "dispatch profile 'p.yaml'")


def test_parameters_set_per_part() -> None:
    spec = parse_profile(GOOD, "test")
    changed = with_params(spec, {"prefix_hit.weight": "0.5", "finish.wait_model": "serial",
                                 "top_k_random": {"k": 3}, "shares_prefills": False}, "test")
    assert changed.scorers == (PartSpec("finish", {"wait_model": "serial"}, 1.0),
                               PartSpec("prefix_hit", {"block_size": 64}, 0.5))
    assert changed.picker.params == {"k": 3} and not changed.shares_prefills
    with pytest.raises(ConfigError, match="has no part 'prefix' \\(parts: healthy, fits_context"):
        with_params(spec, {"prefix.weight": 1}, "test")
    with pytest.raises(ConfigError, match=r"has no parameter 'w_free': set a part's as PART\.PARAM"):
        with_params(spec, {"w_free": 1}, "test")
    with pytest.raises(ConfigError, match=r"finish\.weight: expected a number, got 'x'"):
        with_params(spec, {"finish.weight": "x"}, "test")


def test_a_part_may_serve_some_query_classes() -> None:
    spec = parse_profile({"scorers": ["finish", {"name": "outstanding", "weight": 2, "classes": "batch"}],
                          "guards": [{"name": "pin", "classes": ["batch", "interactive"]}]}, "test")
    assert spec.scorers[1] == PartSpec("outstanding", {}, 2.0, ("batch",))
    assert spec.scorers[0].classes == spec.guards[0].classes == ("interactive", "batch")
    assert spec.describe()["scorers"] == [{"name": "finish", "weight": 1.0},
                                          {"name": "outstanding", "weight": 2.0, "classes": ["batch"]}]
    assert parse_profile(spec.describe(), "again") == spec


def test_a_path_must_look_like_one() -> None:
    assert looks_like_path("p.yaml") and looks_like_path("./flowserve") and looks_like_path("dir/p")
    assert not looks_like_path("flowserve") and not looks_like_path("pkg.mod:Class")


def test_shipped_profiles_parse() -> None:
    assert sorted(SHIPPED) == shipped_names() and {"flowserve", "llmd", "dynamo_kv"} <= set(SHIPPED)
    for name in shipped_names():
        assert shipped_profile(name).name == name


ENTRY = st.one_of(st.text(max_size=12), st.dictionaries(
    st.sampled_from(["name", "weight", "block_size", "k", "x"]),
    st.one_of(st.text(max_size=8), st.integers(-3, 300), st.floats(allow_nan=True), st.booleans(), st.none()),
    max_size=4))
DATA = st.dictionaries(
    st.sampled_from(["name", "scorers", "filters", "picker", "guards", "shares_prefills", "prefix_window_s",
                     "other"]),
    st.one_of(st.lists(ENTRY, max_size=3), ENTRY, st.floats(), st.booleans(), st.none()), max_size=6)


@settings(max_examples=300, deadline=None)
@given(DATA)
def test_fuzzed_profiles_parse_or_fail_with_a_config_error(data: dict[str, Any]) -> None:
    with contextlib.suppress(ConfigError):  # anything else escaping is the failure
        parse_profile(data, "fuzz")
