import asyncio
import json
import time

import httpx
import numpy as np
import pytest

from flowserve.engines.client import EngineClient, EngineError, retryable_status
from flowserve.engines.llamacpp_server import free_port
from flowserve.tokenize.text import LocalTokenizer, make_tokenizer


def run(coro):
    return asyncio.run(coro)


def random_prompt(seed: int, n: int, vocab: int) -> list[int]:
    return np.random.default_rng(seed).integers(2, vocab, n).tolist()


async def with_client(server, fn, **kw):
    async with EngineClient(server.base_url, model="tiny-llama", engine="llamacpp", **kw) as client:
        return await fn(client)


@pytest.mark.real_engine
def test_token_id_prompt_streams_with_client_timings(llama_server, tiny_model):
    prompt = random_prompt(1, 50, tiny_model.vocab_size)
    chunks = []
    res = run(with_client(llama_server, lambda c: c.complete(prompt, 12, ignore_eos=True, on_chunk=chunks.append)))
    assert res.output_tokens == 12 and res.prompt_tokens == 50
    assert res.cached_tokens == 0
    assert res.started < res.first_token <= res.finished
    assert res.finish_reason == "length" and res.model == "tiny-llama"
    assert res.text == "".join(c["choices"][0]["text"] for c in chunks if c.get("choices"))


@pytest.mark.real_engine
def test_repeated_prefix_is_reported_as_cached(llama_server, tiny_model):
    base = random_prompt(2, 600, tiny_model.vocab_size)
    other = base[:500] + random_prompt(3, 100, tiny_model.vocab_size)

    async def go(c):
        return [await c.complete(p, 2) for p in (base, base, other)] + [await c.complete(base, 2, cache_prompt=False)]

    first, again, shared, uncached = run(with_client(llama_server, go))
    assert first.cached_tokens == 0
    assert again.cached_tokens == 599  # all but the last token, which is re-evaluated for its logits
    assert shared.cached_tokens == 500
    assert uncached.cached_tokens == 0


@pytest.mark.real_engine
def test_non_streamed_and_chat_requests(llama_server):
    async def go(c):
        msgs = [{"role": "user", "content": "select the name"}]
        return (await c.chat(msgs, 5, ignore_eos=True), await c.chat(msgs, 5, ignore_eos=True, stream=False),
                await c.complete("count the loans", 3, stream=False, ignore_eos=True),
                await c.apply_chat_template(msgs), await c.models())

    streamed, whole, text, template, models = run(with_client(llama_server, go))
    assert streamed.output_tokens == whole.output_tokens == 5
    assert streamed.text == whole.text  # greedy: same tokens either way
    assert whole.first_token is None and whole.cached_tokens == streamed.prompt_tokens - 1
    assert text.output_tokens == 3 and text.prompt_tokens == 4
    assert template == "user: select the name\nassistant:"
    assert models == ["tiny-llama"]


@pytest.mark.real_engine
def test_engine_and_local_tokenizers_agree(llama_server, tiny_model):
    text = "select sum(amount) from loan where district = 7; naïve ☃"

    async def go(c):
        return (await make_tokenizer(c).encode(text), await make_tokenizer(c, tiny_model.tokenizer_json).encode(text),
                await c.detokenize(await c.tokenize(text)))

    remote, local, back = run(with_client(llama_server, go))
    assert remote == local
    assert back == text
    assert LocalTokenizer(tiny_model.tokenizer_json).decode_sync(local) == text


def test_closed_port_is_retryable():
    async def go():
        async with EngineClient(f"http://127.0.0.1:{free_port()}", engine="llamacpp") as c:
            await c.complete([1, 2, 3], 4)

    with pytest.raises(EngineError, match=r"Connect(or)?Error") as err:
        run(go())
    assert err.value.retryable and err.value.status is None


@pytest.mark.real_engine
def test_client_errors_are_not_retryable(llama_server, tiny_model):
    too_long = random_prompt(4, 5000, tiny_model.vocab_size)  # context is 4096
    for prompt in (too_long, [tiny_model.vocab_size + 5]):
        with pytest.raises(EngineError) as err:
            run(with_client(llama_server, lambda c, p=prompt: c.complete(p, 4)))
        assert err.value.status == 400 and not err.value.retryable


@pytest.mark.real_engine
def test_timeout_is_retryable_and_frees_the_slot(llama_server):
    async def go(c):
        with pytest.raises(EngineError, match=r"within 0\.2 s") as err:
            await c.complete([5, 6, 7], 3500, ignore_eos=True, timeout=0.2)
        assert err.value.retryable
        return await idle_within(c, 10.0)

    assert run(with_client(llama_server, go))


@pytest.mark.real_engine
def test_cancelling_the_task_stops_generation(llama_server):
    async def go(c):
        first = asyncio.Event()
        task = asyncio.create_task(c.complete([5, 6, 7], 3500, ignore_eos=True, on_chunk=lambda _: first.set()))
        await asyncio.wait_for(first.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await idle_within(c, 10.0)

    assert run(with_client(llama_server, go))


async def idle_within(client: EngineClient, seconds: float) -> bool:
    """Poll /slots until no slot is processing (the engine noticed the disconnect)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        slots = await client.slots()
        if not any(s["is_processing"] for s in slots):
            return True
        await asyncio.sleep(0.02)
    return False


# --------------------------------------------------------------------------- mocked transports


def mocked(handler) -> EngineClient:
    return EngineClient("http://engine", model="m", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(("status", "retryable"), [(500, True), (503, True), (429, True), (408, True),
                                                    (400, False), (401, False), (404, False)])
def test_status_codes_are_classified(status, retryable):
    assert retryable_status(status) is retryable

    def handler(request):
        return httpx.Response(status, json={"error": {"message": "boom", "code": status}})

    async def go():
        async with mocked(handler) as c:
            await c.complete("hi", 3, stream=status % 2 == 0)

    with pytest.raises(EngineError, match="boom") as err:
        run(go())
    assert err.value.status == status and err.value.retryable is retryable


def test_openai_stream_without_cache_report_and_error_chunk():
    chunks = [{"model": "m", "choices": [{"delta": {"role": "assistant", "content": ""}}]},
              {"choices": [{"delta": {"content": "a"}}]},
              {"choices": [{"delta": {"content": "b"}, "finish_reason": "stop"}]},
              {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}]

    def ok(request):
        body = json.loads(request.content)
        assert body["stream_options"] == {"include_usage": True} and "cache_prompt" not in body
        return httpx.Response(200, text="".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n")

    def broken(request):
        return httpx.Response(200, text='data: {"error": {"message": "slot crashed", "code": 500}}\n\n')

    async def go():
        async with mocked(ok) as c:
            res = await c.chat([{"role": "user", "content": "x"}], 5)
        async with mocked(broken) as c:
            with pytest.raises(EngineError, match="slot crashed") as err:
                await c.complete("x", 5)
        return res, err.value

    res, err = run(go())
    assert (res.text, res.output_tokens, res.prompt_tokens, res.cached_tokens) == ("ab", 2, 7, None)
    assert res.finish_reason == "stop"
    assert err.retryable and err.status == 500
