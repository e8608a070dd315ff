"""A profile's search space: weights, parameters within their declared ranges, what is kept,
extra scorers at weight 0, and values set back into the profile."""

from __future__ import annotations

import optuna
import pytest

from flowserve.errors import ConfigError
from flowserve.policies.scoring.profile import parse_profile
from flowserve.tune.profile_search import chosen
from flowserve.tune.space import Knob, defaults, number_knob, profile_with, search_space, suggest, with_scorers

SPEC = parse_profile({"name": "p", "scorers": [{"name": "finish", "weight": 2},
                                               {"name": "prefix_hit", "block_size": 64},
                                               {"name": "uncached_work", "w_free": 0.8}],
                      "guards": ["hbal"], "prefix_window_s": 60}, "test profile")


def test_the_knobs_by_hand() -> None:
    knobs = {k.key: k for k in search_space(SPEC)}
    assert list(knobs) == ["finish.weight", "prefix_hit.weight", "uncached_work.weight", "finish.wait_model",
                           "prefix_hit.speculative", "uncached_work.w_free", "hbal.t_hbal", "hbal.wait_model",
                           "prefix_window_s", "shares_prefills"]  # block_size is kept
    assert knobs["finish.weight"] == Knob("finish.weight", 2.0, 0.0, 8.0)  # [0, 4w]
    assert knobs["prefix_hit.weight"] == Knob("prefix_hit.weight", 1.0, 0.0, 4.0)
    assert knobs["uncached_work.w_free"] == Knob("uncached_work.w_free", 0.8, 0.2, 1, log=True)  # Help: le=1
    assert knobs["hbal.t_hbal"] == Knob("hbal.t_hbal", 1.5, 1, 6.0, log=True)  # Help: ge=1
    assert knobs["prefix_window_s"] == Knob("prefix_window_s", 60.0, 15.0, 240.0, log=True)
    assert knobs["finish.wait_model"].choices == ("serial", "batched")


def test_number_knobs_by_hand() -> None:
    assert number_knob("k", 8, integer=True) == Knob("k", 8, 2, 32, log=True, integer=True)
    assert number_knob("k", 0.0) == Knob("k", 0.0, 0.0, 1.0)
    assert number_knob("k", float("inf")) is None
    assert number_knob("k", 2.0, high=1.0) is None  # the default outside its own range: nothing to search


def test_values_go_back_into_the_profile() -> None:
    knobs = search_space(SPEC)
    values = suggest(optuna.trial.FixedTrial({**defaults(knobs), "finish.weight": 0.5, "uncached_work.w_free": 0.3}),
                     knobs)
    tuned = profile_with(SPEC, values, "p-tuned")
    assert tuned.name == "p-tuned"
    assert tuned.scorers[0].weight == 0.5 and tuned.scorers[2].params["w_free"] == 0.3
    assert tuned.scorers[1].params["block_size"] == 64  # kept
    same = profile_with(SPEC, defaults(knobs))  # the defaults written out, nothing else moved
    assert [(p.weight, dict(p.params)) for p in same.scorers] == [
        (2.0, {"wait_model": "batched"}), (1.0, {"block_size": 64, "speculative": True}), (1.0, {"w_free": 0.8})]


def test_a_refused_value_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="w_free must be in"):
        profile_with(SPEC, {"uncached_work.w_free": 3.0})


def test_extra_scorers_join_at_weight_zero() -> None:
    spec = with_scorers(SPEC, ["queue_depth", "finish"])
    assert [(p.name, p.weight) for p in spec.scorers][-1] == ("queue_depth", 0.0)
    assert len(spec.scorers) == 4
    with pytest.raises(ConfigError, match="unknown scorer 'nope'; known: finish"):
        with_scorers(SPEC, ["nope"])


def test_chosen_knobs() -> None:
    knobs = search_space(SPEC)
    assert [k.key for k in chosen(knobs, ["hbal.t_hbal", "finish.weight"])] == ["hbal.t_hbal", "finish.weight"]
    assert chosen(knobs, []) == knobs
    with pytest.raises(ConfigError, match=r"no knob 'finish\.wieght'; its knobs: finish\.weight, "):
        chosen(knobs, ["finish.wieght"])
