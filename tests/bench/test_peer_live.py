"""`bench live --peer`'s workload and summary by hand (the live run itself is a benchmark)."""

from __future__ import annotations

from flowserve.bench.peer_live import PREFIXES, arrivals, requests, summarize, table


def test_prompts_share_prefixes_and_differ_in_their_question() -> None:
    texts, which = requests(40, seed=3)
    docs = {t.split("\nquestion")[0] for t in texts}
    assert 1 < len(docs) <= PREFIXES and len(set(texts)) == 40
    assert requests(40, seed=3) == (texts, which)  # seeded
    assert all(t.startswith(f"document {k}:") for t, k in zip(texts, which, strict=True))
    times = arrivals(40, 10.0, seed=3)
    assert times == sorted(times) and 1.0 < times[-1] < 10.0  # 40 at 10/s: about 4 s


def test_summary_averages_repetitions_and_needs_all_three_figures_better() -> None:
    def run(router: str, slots: int, mean: float, p99: float, hit: float) -> dict:
        return {"router": router, "slots": slots, "mean_s": mean, "p99_s": p99, "hit_rate": hit,
                "sim_mean_s": mean * 1.5, "sim_p99_s": p99, "sim_hit_rate": hit, "sim_at_speed_mean_s": mean,
                "engine_speed": 1.0}

    runs = [run("flowserve", 1, 0.2, 0.5, 0.6), run("flowserve", 1, 0.4, 0.7, 0.8),
            run("sglang-router", 1, 0.35, 0.9, 0.6), run("sglang-router", 1, 0.35, 0.9, 0.6),
            run("flowserve", 4, 0.1, 0.2, 0.5), run("sglang-router", 4, 0.2, 0.4, 0.6)]
    one, four = summarize(runs)
    assert abs(one["flowserve"]["mean_s"] - 0.3) < 1e-12
    assert one["flowserve"]["reps"] == 2 and one["flowserve_better"]  # 0.3 < 0.35, 0.6 < 0.9, 0.7 > 0.6
    assert not four["flowserve_better"]  # faster, but a lower hit rate
    assert abs(four["mean_ratio"] - 0.5) < 1e-12 and abs(four["flowserve"]["sim_error_pct"] - 50.0) < 1e-9
    assert "flowserve / sglang-router mean ×0.50" in table([one, four])
