"""The gateway in front of real llama-server instances (started and stopped here, on
127.0.0.1), driven by the official `openai` client."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest
from live_support import tiny_profile

from flowserve.core import InstanceStatus
from flowserve.engines.llamacpp_server import LlamaServer
from flowserve.engines.tinymodel import TinyModel
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import load_serve_config
from flowserve.policies import DISPATCH_POLICIES

pytestmark = pytest.mark.real_engine  # every test here starts llama-server

KEY = "sk-llama"
WORDS = ("select", "count", "from", "where", "join", "account", "client", "loan", "district", "amount", "date",
         "year", "name", "order", "group", "table", "column", "schema", "database", "value", "total", "average",
         "status", "payment")


def serve_file(tmp: Path, servers: list[LlamaServer], profile: Path, **gateway: object) -> Path:
    import yaml

    path = tmp / f"serve-{random.random():.6f}.yaml"
    path.write_text(yaml.safe_dump({
        "instances": [{"name": f"llama{i}", "profile": str(profile), "backend": "openai", "url": s.base_url}
                      for i, s in enumerate(servers)],
        "api_keys": [KEY],
        "gateway": {"retry_backoff_s": 0.02, **gateway},
    }))
    return path


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


@pytest.fixture(scope="module")
def pair(llama_server_binary: Path, tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[list[LlamaServer]]:
    """Two engines with one slot cache each (`-np 1 --cache-ram 0`): a second prefix evicts the first."""
    logs = tmp_path_factory.mktemp("llama-pair")
    with contextlib.ExitStack() as stack:  # every one started is stopped, also when a later one fails
        yield [stack.enter_context(LlamaServer(
            tiny_model.gguf, ctx_size=4096, parallel=1, threads=1, cache_ram=0, alias=tiny_model.name,
            binary=llama_server_binary, log_path=logs / f"{i}.log")) for i in range(2)]


def test_openai_client_through_the_gateway_to_llama_server(llama_server: LlamaServer, tiny_model: TinyModel,
                                                           tmp_path: Path) -> None:
    cfg = load_serve_config(serve_file(tmp_path, [llama_server], tiny_profile(tmp_path / "p.yaml", tiny_model, 2)))
    with BackgroundServer(create_app(cfg)) as srv:
        c = openai.OpenAI(base_url=f"{srv.url}/v1", api_key=KEY, max_retries=0)
        prompt = "select the total amount of loans per district " * 40
        first = c.completions.create(model=tiny_model.name, prompt=prompt, max_tokens=5,
                                     extra_body={"ignore_eos": True})
        again = c.completions.create(model=tiny_model.name, prompt=prompt, max_tokens=5,
                                     extra_body={"ignore_eos": True})
        assert first.usage.completion_tokens == 5 and first.choices[0].text
        assert first.usage.prompt_tokens > 300
        # the engine reports the cached prefix of the repeated prompt
        assert again.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 1
        chat = c.chat.completions.create(model=tiny_model.name, max_tokens=4,
                                         messages=[{"role": "user", "content": "count the clients"}])
        assert chat.choices[0].message.role == "assistant" and chat.usage.completion_tokens <= 4
        stream = list(c.chat.completions.create(model=tiny_model.name, max_tokens=6, stream=True,
                                                messages=[{"role": "user", "content": "list the loans"}],
                                                extra_body={"ignore_eos": True}))
        assert sum(1 for ch in stream if ch.choices and ch.choices[0].delta.content) >= 1
        assert stream[-1].choices[0].finish_reason in ("length", "stop")
        # issue 35 item 17: the engine's own answer — its id and fingerprint, its role-only first chunk
        assert first.system_fingerprint and first.id != again.id and "q-" not in first.id
        assert len({(ch.id, ch.system_fingerprint) for ch in stream}) == 1 and stream[0].system_fingerprint
        assert stream[0].choices[0].delta.role == "assistant" and not stream[0].choices[0].delta.content
        assert stream[1].choices[0].delta.role is None
        with pytest.raises(openai.BadRequestError) as info:  # the profile's context: 4096 tokens
            c.completions.create(model=tiny_model.name, prompt=list(range(5, 4200)), max_tokens=10)
        assert info.value.code == "context_length_exceeded"
        body = httpx.post(f"{srv.url}/v1/completions", json={"model": "llama-70b", "prompt": "x"},
                          headers={"authorization": f"Bearer {KEY}"}).json()
        assert body["error"]["code"] == "model_not_found"


def shared_prefix_run(pair: list[LlamaServer], profile: Path, tmp: Path, policy: str, seed: int
                      ) -> list[tuple[int, str, int, int]]:
    """Two ~700-token prefixes, each asked about twice in a row, four rounds; returns
    (prefix, instance, prompt tokens, engine-reported cached tokens) per request."""
    cfg = load_serve_config(serve_file(tmp, pair, profile, dispatch=policy))
    rng = random.Random(seed)
    prefixes = [text(rng, 450) for _ in range(2)]
    out = []
    with BackgroundServer(create_app(cfg)) as srv, httpx.Client(base_url=srv.url, timeout=60,
                                                                headers={"authorization": f"Bearer {KEY}"}) as h:
        for _round in range(2):
            for p in (0, 0, 1, 1):
                resp = h.post("/v1/completions", json={"model": "tiny-llama", "max_tokens": 2,
                                                       "prompt": prefixes[p] + " " + text(rng, 6)})
                assert resp.status_code == 200, resp.text
                use = resp.json()["usage"]
                out.append((p, resp.headers["x-flowserve-instance"], use["prompt_tokens"],
                            use["prompt_tokens_details"]["cached_tokens"]))
    return out


# prefix-aware policies available on this branch (preble_e2 joins when it is merged)
PREFIX_AWARE = [p for p in ("prefix_affinity", "preble_e2") if p in DISPATCH_POLICIES]


@pytest.mark.parametrize("policy", PREFIX_AWARE)
def test_shared_prefixes_land_where_they_are_cached_under_a_prefix_aware_policy(
        pair: list[LlamaServer], tiny_model: TinyModel, tmp_path: Path, policy: str) -> None:
    profile = tiny_profile(tmp_path / "p1.yaml", tiny_model, slots=1)
    affinity = shared_prefix_run(pair, profile, tmp_path, policy, seed=1)
    robin = shared_prefix_run(pair, profile, tmp_path, "round_robin", seed=2)
    # prefix-aware: each prefix stays on one instance, and every request after its first hits
    for p in (0, 1):
        assert len({inst for q, inst, _, _ in affinity if q == p}) == 1
    assert {inst for _, inst, _, _ in affinity} == {"llama0", "llama1"}
    first_seen = {0: 0, 1: 2}
    for k, (p, _inst, prompt, cached) in enumerate(affinity):
        if k != first_seen[p]:
            assert cached >= prompt - 20, affinity
    # round robin spreads each prefix over both instances; one slot each: the other prefix evicts it
    for p in (0, 1):
        assert len({inst for q, inst, _, _ in robin if q == p}) == 2
    hit = sum(c for *_, c in affinity) / sum(n for _, _, n, _ in affinity)
    hit_rr = sum(c for *_, c in robin) / sum(n for _, _, n, _ in robin)
    assert hit > 0.6 and hit_rr < 0.2, (hit, hit_rr)


def test_an_instance_killed_mid_run_loses_no_query(start_llama_server, tiny_model: TinyModel,
                                                   tmp_path: Path) -> None:
    servers = [start_llama_server(parallel=2) for _ in range(2)]
    cfg = load_serve_config(serve_file(tmp_path, servers, tiny_profile(tmp_path / "p.yaml", tiny_model, 2),
                                       breaker_failures=2, breaker_cooldown_s=30))
    app = create_app(cfg)
    rng = random.Random(3)
    prompts = [text(rng, 300) for _ in range(10)]
    with BackgroundServer(app) as srv:
        gw = app.state.gateway
        c = openai.OpenAI(base_url=f"{srv.url}/v1", api_key=KEY, max_retries=0, timeout=120)

        def ask(p: str) -> openai.types.Completion:
            return c.completions.create(model=tiny_model.name, prompt=p, max_tokens=48,
                                        extra_body={"ignore_eos": True})

        with ThreadPoolExecutor(len(prompts)) as pool:
            futures = [pool.submit(ask, p) for p in prompts]
            def victim() -> InstanceStatus:
                return next(s for s in gw.driver.core.instance_status() if s.name == "llama0")

            asyncio.run_coroutine_threadsafe(gw.driver.until(lambda: victim().running > 0),
                                             gw.driver_loop).result(60)
            servers[0].stop(timeout=0)  # SIGTERM mid-generation
            results = [f.result(120) for f in futures]
        assert all(r.usage.completion_tokens == 48 for r in results)
        assert not victim().up
        states = {i["name"]: i for i in gw.driver.instances()}
        assert states["llama0"]["circuit"] in ("open", "half_open")
        assert states["llama1"]["completed"] >= len(prompts) - states["llama0"]["completed"]
        metrics = httpx.get(f"{srv.url}/metrics").text
        assert 'flowserve_circuit_trips_total{instance="llama0"} 1.0' in metrics
