"""Small pure parts of the live side: breaker, back-off, cache estimate, scaled cost,
tokenizer, SQL extraction and execution, serving configuration."""

from __future__ import annotations

import pytest

from flowserve.apps.text2sql import extract_sql
from flowserve.apps.text2sql.bank import create_demo_db
from flowserve.cache.prefix_index import PrefixIndex
from flowserve.engines.cache_estimate import CacheEstimate
from flowserve.engines.scaled_cost import ScaledCost
from flowserve.errors import ConfigError
from flowserve.graph.prompt import Lit, as_chat
from flowserve.host.breaker import CircuitBreaker, backoff_delay
from flowserve.host.settings import serve_config
from flowserve.host.tools import ToolError, run_sql
from flowserve.profiles.cost_model import cost_model_for
from flowserve.tokenize.chat import chat_parts
from flowserve.tokenize.words import WordTokenizer


def test_backoff_doubles_up_to_the_cap() -> None:
    assert [backoff_delay(k, 0.05, 0.15) for k in (1, 2, 3, 4)] == [0.05, 0.1, 0.15, 0.15]


def test_breaker_opens_after_consecutive_failures_and_probes_with_growing_cooldown() -> None:
    b = CircuitBreaker(failures=3, cooldown_s=1.0, max_cooldown_s=3.0)
    assert not b.record_failure(10.0) and not b.record_failure(10.1)
    b.record_success()  # a success resets the count
    assert not b.record_failure(11.0) and not b.record_failure(11.1)
    assert b.record_failure(11.2) and b.state == "open"
    assert not b.record_failure(11.3)  # already open: no second trip
    assert b.probe_at() == pytest.approx(12.2)
    b.begin_probe()
    b.probe_failed(12.5)
    assert b.state == "open" and b.probe_at() == pytest.approx(14.5)
    b.begin_probe()
    b.probe_failed(15.0)
    assert b.probe_at() == pytest.approx(18.0)  # capped at 3 s
    b.begin_probe()
    assert b.record_success() and b.state == "closed" and b.trips == 1


def test_cache_estimate_evicts_lru_unpinned_prefixes_and_reports_them() -> None:
    est = CacheEstimate("a", capacity_tokens=100)
    index = PrefixIndex()
    p1, p2, p3 = tuple(range(60)), tuple(range(100, 160)), tuple(range(200, 260))
    index.add(p1, "a", 0.0)
    index.add(p2, "a", 0.0)
    assert est.on_send(1, p1, 1.0) == []
    est.on_end(1)
    evicted = est.on_send(2, p2, 2.0)  # 120 > 100 tokens: the finished, older prompt goes
    assert [(ev.instance, ev.tokens, ev.start) for ev in evicted] == [("a", p1, 0)]
    for ev in evicted:
        index.discard(ev.instance, ev.tokens, ev.start)
    assert index.match_by_instance(p1)[1] == {} and index.match_by_instance(p2)[1] == {"a": 60}
    assert est.on_send(3, p3, 3.0) == []  # p2 still runs: pinned, so over capacity for now
    est.on_end(2)
    est.on_end(3)
    # 180 tokens: least recently used first until it fits, the running p1 stays
    assert [ev.tokens for ev in est.on_send(4, p1, 4.0)] == [p2, p3]
    assert est.size == 60 and est.evicted_tokens == 180


def test_cache_estimate_never_evicts_running_prompts() -> None:
    est = CacheEstimate("a", capacity_tokens=50)
    assert est.on_send(1, tuple(range(40)), 0.0) == []
    assert est.on_send(2, tuple(range(100, 140)), 1.0) == []  # both running: over capacity, nothing evictable
    assert est.size == 80
    est.on_end(1)
    assert [ev.tokens for ev in est.on_send(3, (7,), 2.0)] == [tuple(range(40))]


def test_scaled_cost_multiplies_every_time() -> None:
    base = cost_model_for("A100-80G", "llama-3.1-8b")
    half = ScaledCost(base, 0.5)
    assert half.call_time(1000, 20, 100) == pytest.approx(0.5 * base.call_time(1000, 20, 100))
    assert half.prefill_time(300) == pytest.approx(0.5 * base.prefill_time(300))
    assert half.decode_step_time(4, 900) == pytest.approx(0.5 * base.decode_step_time(4, 900))
    assert half.iteration_time(10, 55.0, 2, 300) == pytest.approx(0.5 * base.iteration_time(10, 55.0, 2, 300))


def test_word_tokenizer_keeps_shared_text_prefixes_shared() -> None:
    tok = WordTokenizer(vocab_size=1000, reserved=10)
    a = tok.encode_sync("select name from client where id = 1")
    b = tok.encode_sync("select name from client where id = 2")
    assert len(a) == len(b) == 8 and a[:7] == b[:7] and a[7] != b[7]
    assert all(10 <= t < 1000 for t in a)
    assert chat_parts(as_chat([{"role": "user", "content": "hi"}])) == (Lit("<|user|>\nhi\n<|assistant|>\n"),)


def test_extract_sql_from_model_answers() -> None:
    assert extract_sql("```sql\nSELECT 1;\n```") == "SELECT 1;"
    assert extract_sql("Sure! select a from t; -- done") == "select a from t;"
    assert extract_sql("WITH x AS (SELECT 1) SELECT * FROM x") == "WITH x AS (SELECT 1) SELECT * FROM x"
    assert extract_sql("  no sql here ") == ""  # no SQL: the agent revises, then fails the query


def test_run_sql_executes_read_only_and_reports_sqlite_errors(tmp_path) -> None:
    db = create_demo_db(tmp_path / "bank.sqlite")
    out = run_sql(str(db), "SELECT COUNT(*) FROM client", 5.0)
    assert out == {"columns": ["COUNT(*)"], "rows": [[200]], "truncated": False}
    assert run_sql(str(db), "SELECT client_id FROM client", 5.0, max_rows=3)["truncated"] is True
    with pytest.raises(ToolError, match="no such table: clients"):
        run_sql(str(db), "SELECT * FROM clients", 5.0)
    with pytest.raises(ToolError, match=r"refused by the read-only sandbox: DELETE \(client\)"):
        run_sql(str(db), "DELETE FROM client", 5.0)
    with pytest.raises(ToolError, match="time limit"):
        run_sql(str(db), "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                         "SELECT COUNT(*) FROM r", 0.05)


def test_serve_config_reads_the_gateway_section_and_names_bad_input() -> None:
    base = {"instances": [{"name": "a", "gpu": "A100-80G", "model": "llama-3.1-8b"}]}
    cfg = serve_config({**base, "api_keys": ["k"], "gateway": {"dispatch": "prefix_affinity", "max_queue_s": 5}},
                       "c.yaml")
    assert cfg.api_keys == ("k",) and cfg.admin_keys == ("k",)
    assert cfg.gateway.dispatch == "prefix_affinity" and cfg.gateway.max_queue_s == 5
    with pytest.raises(ConfigError, match="unknown dispatch policy 'nope'"):
        serve_config({**base, "gateway": {"dispatch": "nope"}}, "c.yaml")
    with pytest.raises(ConfigError, match="gateway: time_scale"):
        serve_config({**base, "gateway": {"time_scale": 0}}, "c.yaml")
    with pytest.raises(ConfigError, match="gateway: retries_typo: unknown field"):
        serve_config({**base, "gateway": {"retries_typo": 1}}, "c.yaml")
    with pytest.raises(ConfigError, match="needs a `url:`"):
        serve_config({"instances": [{**base["instances"][0], "backend": "openai"}]}, "c.yaml")
    with pytest.raises(ConfigError, match="unknown instances"):
        serve_config({**base, "gateway": {"cache_tokens": {"zz": 10}}}, "c.yaml")


def test_cache_estimate_with_slots_keeps_at_most_that_many_sequences() -> None:
    est = CacheEstimate("a", capacity_tokens=10_000, max_sequences=2)
    seqs = [tuple(range(k * 100, k * 100 + 50)) for k in range(3)]
    for cid, p in enumerate(seqs[:2]):
        assert est.on_send(cid, p, float(cid)) == []
        est.on_end(cid)
    evicted = est.on_send(2, seqs[2], 2.0)
    assert [ev.tokens for ev in evicted] == [seqs[0]] and est.size == 100
