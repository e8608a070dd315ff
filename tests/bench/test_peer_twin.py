"""The simulated twin of `bench live --peer sglang-router` (issue 41): on llama-server's slot
caches, the `flowserve` queue holds calls at the engine's sweet spot, so each request finds
its document in an idle slot; opening the gate to the slots (the regression of 89eb82b)
makes every request take the one slot that frees and overwrite the document it kept."""

from __future__ import annotations

import numpy as np
import pytest

from flowserve.bench.peer_twin import common_prefix_len, engine_speed, simulate_twin, twin_cluster, twin_workload
from flowserve.core.records import CallRecord
from flowserve.policies import flowserve_queue
from flowserve.profiles.fitted import FittedCostModel
from flowserve.profiles.slot_config import SlotConfig

# the fitted profile of the tiny model on one llama-server thread (`bench live` fits it): prefill
# ~0.2 ms a token, a decode step that grows with the batch (no batching gain: sweet spot 1)
TINY = FittedCostModel("tiny-llama", (6e-4, 3.8e-3, 2.1e-4, 3.5e-7, 1.1e-4, 1.4e-6), 16384, 16384, 4, 2048,
                       "llama-server (1 thread)", slot_config=SlotConfig(True, 0, 0.1, True))
DOCS, DOC_TOKENS = 8, 1500


def trace(n: int, rate: float, seed: int) -> tuple[list[list[int]], list[float], list[int]]:
    """The bench's shape: one of 8 documents and a 30-token question each, Poisson arrivals."""
    rng = np.random.default_rng(seed)
    docs = [int(rng.integers(DOCS)) for _ in range(n)]
    ids = [list(range(k * 10_000, k * 10_000 + DOC_TOKENS)) + list(range(900_000 + 40 * i, 900_000 + 40 * i + 30))
           for i, k in enumerate(docs)]
    return ids, [float(t) for t in np.cumsum(rng.exponential(1 / rate, n))], docs


@pytest.fixture
def profile(tmp_path):
    path = tmp_path / "tiny.yaml"
    TINY.save(path)
    return path


def test_twin_workload_cuts_each_prompt_where_its_documents_requests_diverge() -> None:
    ids = [[1, 2, 3, 9], [1, 2, 4, 8], [5, 6, 7]]
    wl = twin_workload(ids, [0.0, 1.0, 2.0], [0, 0, 1], 16)
    (a,), (b,), (c,) = (q.plan.calls() for q in wl.queries)
    assert [s.length for s in a.prompt] == [2, 2] and [s.length for s in b.prompt] == [2, 2]
    assert a.prompt[0].id == b.prompt[0].id != a.prompt[1].id != b.prompt[1].id
    assert [s.length for s in c.prompt] == [2, 1]  # alone: all of it shared but its last token
    assert common_prefix_len([1, 2, 3], [1, 2]) == 2


def test_twin_cluster_gates_flowserve_at_the_slots_and_sglang_not(profile) -> None:
    gated, open_ = twin_cluster(profile, 4, True), twin_cluster(profile, 4, False)
    assert [s.max_inflight for s in gated] == [4, 4] and [s.max_inflight for s in open_] == [None, None]
    assert all(s.engine.max_num_seqs == 4 and s.backend == "sim" and s.profile.slot_config for s in gated)


def test_flowserve_keeps_the_slot_caches_where_the_open_gate_lost_them(profile, monkeypatch) -> None:
    ids, times, docs = trace(80, 6.0, seed=31)
    wl = twin_workload(ids, times, docs, 16)
    ours, peer = simulate_twin("flowserve", wl, profile, 4), simulate_twin("sglang-router", wl, profile, 4)
    assert ours["sim_hit_rate"] >= 0.6 > peer["sim_hit_rate"] + 0.2
    assert ours["sim_mean_s"] < 0.5 * peer["sim_mean_s"]
    # the regression's behaviour: the gate opening to the slots whenever calls wait
    monkeypatch.setattr(flowserve_queue, "slot_caches", lambda inst: False)
    opened = simulate_twin("flowserve", wl, profile, 4)
    assert opened["sim_hit_rate"] < 0.45 and opened["sim_mean_s"] > 2 * ours["sim_mean_s"]


def test_engine_speed_by_hand() -> None:
    cost = FittedCostModel("m", (0.0, 0.0, 1e-3, 0.0, 1e-4, 0.0), 4096, 4096, 2)  # 1 ms a prompt token
    calls = [CallRecord(1, 1, "w", "s", "e", 100, 4, 40, 0, 0, 0, 0, 0, 1, 0, 1),  # 60 computed
             CallRecord(2, 2, "w", "s", "e", 50, 4, 10, 0, 0, 0, 0, 0, 1, 0, 1)]  # 40 computed
    # the profile: 0.1 s for 100 computed tokens; live: 3 s for 1,500 (2 ms a token)
    assert engine_speed(3.0, 1500, calls, cost) == pytest.approx(2.0)
    assert engine_speed(0.0, 1500, calls, cost) == 1.0  # nothing reported


def test_the_twin_at_the_engines_reported_speed(profile) -> None:
    ids, times, docs = trace(30, 1.0, seed=5)  # light load: each request nearly alone
    wl = twin_workload(ids, times, docs, 16)
    base = simulate_twin("flowserve", wl, profile, 4)
    assert "sim_at_speed_mean_s" not in base
    # engines that computed prompts twice as slowly per token as the profile says
    per_token = 2 * TINY.prefill_time(DOC_TOKENS + 30) / (DOC_TOKENS + 30)
    slow = simulate_twin("flowserve", wl, profile, 4, {"prompt_seconds": per_token * 1000, "computed_tokens": 1000})
    assert 1.5 < slow["engine_speed"] < 2.5
    assert 1.5 < slow["sim_at_speed_mean_s"] / slow["sim_mean_s"] <= 2.5
    assert slow["sim_mean_s"] == base["sim_mean_s"]
