"""Does the gateway tokenize exactly as the engine? Checked once when an engine answers.

An engine's cache events name blocks of token ids, and the router matches its prompts'
token ids against them: with a local tokenizer or chat template (`gateway.tokenizers`,
`gateway.chat_templates`) that differs from the engine's in one id, no block ever
matches. So for each engine that publishes events, a probe text and a probe chat are
tokenized both ways — the gateway's (`GatewayTokens`) and the engine's own `/tokenize`
— and the outcome is logged (a warning naming the first difference) and shown per
instance on /status (`tokenization`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from flowserve.engines.client import EngineError
from flowserve.engines.openai_backend import OpenAIBackend
from flowserve.graph.prompt import Chat, Lit, Turn
from flowserve.host.routing_tokens import GatewayTokens
from flowserve.tokenize.chat import chat_messages

log = logging.getLogger("flowserve.gateway")
PROBE_TEXT = "Select the 3 largest accounts (naïve café, 10⁻³ €) WHERE region = 'Nord';\n\tthen summarise."
PROBE_CHAT = Chat((Turn("system", (Lit("You answer in one line."),)), Turn("user", (Lit(PROBE_TEXT),))))
WAIT_S = 600.0  # how long an engine may take to answer at all (vLLM on a CPU: minutes)


def first_difference(a: Sequence[int], b: Sequence[int]) -> str | None:
    """None when equal, else where and how two id sequences part."""
    if list(a) == list(b):
        return None
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f"{len(a)} ids against {len(b)}, first difference at {i} ({a[i:i + 3]} against {b[i:i + 3]})"


async def check_tokenization(name: str, backend: OpenAIBackend, tokens: GatewayTokens) -> str:
    """The verdict for one instance: "matches the engine", or what differs (or why unknown)."""
    model = backend.spec.model
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    delay = 1.0
    while True:
        try:
            client = await backend.client()
            engine_text = await client.tokenize(PROBE_TEXT)
            break
        except EngineError as e:
            if not e.retryable or loop.time() > deadline:
                return f"unknown: the engine's /tokenize failed: {e}"
            await asyncio.sleep(delay)  # the engine is still starting: ask again later
            delay = min(2 * delay, 30.0)
    verdicts = []
    try:
        diff = first_difference(await tokens.text(PROBE_TEXT, model), engine_text)
        verdicts.append(None if diff is None else f"text: {diff}")
        if client.engine != "llamacpp":
            ours = await tokens.chat(PROBE_CHAT, model)
            theirs = await client.tokenize_chat(chat_messages(PROBE_CHAT), ())
            diff = first_difference(ours, theirs)
            verdicts.append(None if diff is None else f"chat: {diff}")
    except EngineError as e:
        return f"unknown: {e}"
    found = [v for v in verdicts if v is not None]
    if not found:
        return "matches the engine"
    verdict = "differs from the engine: " + "; ".join(found)
    log.warning("instance %s: the gateway's token ids differ from the engine's (%s): its KV-cache events will "
                "not match the gateway's prompts; tokenize with the engine's own tokenizer.json and chat template "
                "(gateway.tokenizers, gateway.chat_templates) or leave them out", name, "; ".join(found))
    return verdict
