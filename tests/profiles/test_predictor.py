from flowserve.profiles import OutputPredictor


def test_prior_then_learns_the_observed_mean():
    p = OutputPredictor({("wf", "a"): 100.0}, prior_weight=4)
    assert p.predict("wf", "a") == 100
    assert p.predict("wf", "unknown") == 128  # default
    for _ in range(4):
        p.observe("wf", "a", 20)
    # (4·100 + 4·20) / 8 = 60
    assert p.predict("wf", "a") == 60
    for _ in range(1000):
        p.observe("wf", "a", 20)
    assert p.predict("wf", "a") == 20
    assert p.observations("wf", "a") == 1004
    assert p.predict("other", "a") == 128  # per workflow
