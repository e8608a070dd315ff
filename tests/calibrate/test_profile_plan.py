"""The profile's plan cut to a time budget: the round's estimate on a hand-computed example,
fewer rounds first, then every length scaled by one factor."""

import pytest

from flowserve.calibrate.profile_plan import EngineSpeed, ProfileSettings, fit_to_budget, round_seconds, scaled

SMALL = ProfileSettings(prefill_lengths=(100,), batch_sizes=(2,), decode_contexts=(50,), decode_tokens=10,
                        cached_prefixes=(200,), cached_suffixes=(20,), request_shapes=((0, 30, 5),),
                        mixed_shapes=((1, 40, 60),), repeats=3)
SPEED = EngineSpeed(prefill_s_per_token=0.01, decode_step_s=0.1)


def test_a_round_is_its_prefilled_tokens_and_decode_steps():
    # prefill 100·0.01; decode 2·50·0.01 + 10·0.1·(1 + 1/4); cached (200 + 2·20)·0.01;
    # mixed (40 + 60)·0.01 + 2·0.1; whole request (0 + 2·30)·0.01 + 5·0.1
    assert round_seconds(SMALL, SPEED) == pytest.approx(1.0 + 2.25 + 2.4 + 1.2 + 1.1)


def test_a_plan_that_fits_is_kept_and_one_without_budget_too():
    assert fit_to_budget(SMALL, SPEED) == (SMALL, None)
    fits = ProfileSettings(**{**SMALL.__dict__, "budget_s": 24.0})
    assert fit_to_budget(fits, SPEED) == (fits, None)


def test_rounds_are_cut_before_lengths():
    plan, note = fit_to_budget(ProfileSettings(**{**SMALL.__dict__, "budget_s": 20.0}), SPEED)
    assert plan.repeats == 2 and plan.prefill_lengths == (100,) and "2 within the budget" in note


def test_lengths_shrink_by_one_factor_when_one_round_is_too_long():
    full = ProfileSettings(budget_s=480.0)
    slow = EngineSpeed(prefill_s_per_token=1 / 40, decode_step_s=0.07)  # a 135M model on a busy CPU
    assert round_seconds(full, slow) > 1000
    plan, note = fit_to_budget(full, slow)
    assert plan.repeats == 1 and round_seconds(plan, slow) <= 480 < round_seconds(scaled(full, 0.5), slow)
    assert len(plan.prefill_lengths) == 7 and 1000 < max(plan.prefill_lengths) < 3072 and "one round" in note
    assert plan.cached_suffixes == full.cached_suffixes and plan.decode_tokens == full.decode_tokens


def test_scaling_keeps_lengths_above_the_floor_and_drops_duplicates():
    s = scaled(ProfileSettings(prefill_lengths=(16, 64, 256), decode_contexts=(32, 1024)), 0.1)
    assert s.prefill_lengths == (16, 26) and s.decode_contexts == (16, 102)
