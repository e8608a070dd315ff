import asyncio
import json

import pytest
import yaml
from typer.testing import CliRunner

from flowserve.calibrate.profiler import ProfileSettings, detect_engine, engine_facts, profile_engine
from flowserve.cli import app
from flowserve.engines.client import EngineClient
from flowserve.engines.llamacpp_server import free_port
from flowserve.profiles.fitted import load_profile
from flowserve.profiles.slot_config import SlotConfig


@pytest.mark.real_engine
def test_profiles_llama_server_with_its_reported_facts(llama_server, tiny_model):
    async def go():
        assert await detect_engine(llama_server.base_url) == "llamacpp"
        async with EngineClient(llama_server.base_url, model=tiny_model.name, engine="llamacpp") as c:
            facts = await engine_facts(c)
            return facts, *(await profile_engine(c, settings=ProfileSettings.quick()))

    facts, fitted, report = asyncio.run(go())
    assert (facts.slots, facts.max_context, facts.vocab_size) == (2, 4096, tiny_model.vocab_size)
    assert (fitted.model, fitted.slots, fitted.max_context, fitted.kv_capacity_tokens) == ("tiny-llama", 2, 4096, 4096)
    kinds = [s.kind for s in report.samples]
    assert kinds.count("prefill") == 3 and kinds.count("decode") == 4 and kinds.count("cached_prefill") == 1
    assert kinds.count("mixed") == 1  # one decoder (slots − 1) beside a 128-token prefill
    (mixed,) = [s for s in report.samples if s.kind == "mixed"]
    assert mixed.x[4] == 1.5  # decoding sequences: one per prefill chunk plus half the step in flight
    assert fitted.slot_config == SlotConfig()  # a llama-server profile carries its slot rules
    assert all(s.seconds > 0 for s in report.samples) and min(fitted.coefficients) >= 0
    assert set(report.cache_speedups) == {"256+32"}
    assert fitted.narrow_prefill_tokens == 64
    assert fitted.quality is not None and fitted.quality.samples == len(report.samples)
    assert fitted.prefill_time(512) > 0 and fitted.decode_step_time(2, 600) > 0


@pytest.mark.real_engine
def test_a_short_budget_cuts_the_plan_and_says_so(llama_server, tiny_model, tmp_path):
    res = CliRunner().invoke(app, ["profile", "--url", llama_server.base_url, "--model", tiny_model.name,
                                   "--out", str(tmp_path / "p.yaml"), "--budget-minutes", "0.02"])
    assert res.exit_code == 0, res.output
    assert "rounds need" in res.output or "one round of the full plan needs" in res.output
    assert load_profile(tmp_path / "p.yaml").slots == 2


@pytest.mark.real_engine
def test_cli_writes_a_profile_the_simulator_accepts(llama_server, tiny_model, tmp_path):
    out, js = tmp_path / "tiny.yaml", tmp_path / "m.json"
    res = CliRunner().invoke(app, ["profile", "--url", llama_server.base_url, "--model", tiny_model.name,
                                   "--out", str(out), "--quick", "--json", str(js)])
    assert res.exit_code == 0, res.output
    assert "fit error" in res.output and "cached-prefix speed-up" in res.output
    # progress: the probe, then a line per measured point, as each ends
    assert "probe: " in res.output and "[1/11] round 1/1: prefill 16 tokens" in res.output and "[11/11]" in res.output
    fitted = load_profile(out)
    assert fitted.model == "tiny-llama" and fitted.slots == 2
    assert len(json.loads(js.read_text())["samples"]) == 9
    cluster = tmp_path / "c.yaml"
    cluster.write_text(yaml.safe_dump({"instances": [{"name": "llama", "profile": "tiny.yaml", "count": 2}]}))
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({
        "id": i, "arrival": 0.1 * i, "workflow": "chat",
        "steps": [[{"stage": "answer", "prompt": [[1, 300], [100 + i, 50]], "output": 20}]]}) + "\n"
        for i in range(8)))
    summary = tmp_path / "s.json"
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(cluster), "--workload", str(trace),
                                   "--slo-scales", "2", "--json", str(summary)])
    assert res.exit_code == 0, res.output
    assert json.loads(summary.read_text())["calls"] == 8


def test_cli_profile_of_a_closed_port_is_one_line_exit_2():
    res = CliRunner().invoke(app, ["profile", "--url", f"http://127.0.0.1:{free_port()}", "--model", "m",
                                   "--engine", "llamacpp", "--quick"])
    assert res.exit_code == 2
    assert "ConnectError" in res.output
