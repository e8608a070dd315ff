"""Chats (`flowserve.graph.prompt.Chat`) as what engines and the simulator read.

* `chat_messages`: the OpenAI messages an engine (or a chat template) receives — every
  turn's content must be text by then (the live runtime resolved step outputs to text).
* `chat_parts`: a neutral `<|role|>` layout as prompt parts, for the simulator and the
  gateway's simulated engines, which have no chat template: step outputs stay segments,
  so a simulated chat shares prefixes exactly as its turns do.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from flowserve.graph.prompt import Chat, Lit, Part, Prompt


class ChatTokenizer(Protocol):
    """What the router asks of an engine: its token ids for a text and for a chat, as
    the engine itself would render and tokenize them."""

    async def encode(self, text: str) -> list[int]: ...

    async def encode_chat(self, chat: Chat) -> list[int]: ...


def chat_messages(chat: Chat) -> list[dict[str, Any]]:
    """The chat's OpenAI messages (raises ValueError for content that is not text)."""
    out = []
    for t in chat.turns:
        content = None
        if t.content is not None:
            texts = [p.text for p in t.content if isinstance(p, Lit)]
            if len(texts) < len(t.content):
                raise ValueError(f"a {t.role!r} turn holds a modelled segment or token ids, not text: "
                                 f"only simulated engines can run it")
            content = "".join(texts)
        out.append({"role": t.role, "content": content, **t.fields})
    return out


def chat_parts(chat: Chat) -> Prompt:
    """The chat in a neutral layout (`<|role|>` blocks; tools and tool calls as JSON)."""
    parts: list[Part] = []
    if chat.tools:
        parts.append(Lit(f"<|tools|>\n{json.dumps(list(chat.tools), ensure_ascii=False)}\n"))
    for t in chat.turns:
        parts.append(Lit(f"<|{t.role}|>\n"))
        parts.extend(t.content or ())
        extra = {k: v for k, v in t.fields.items() if k in ("tool_calls", "tool_call_id")}
        parts.append(Lit(f"{json.dumps(extra, ensure_ascii=False)}\n" if extra else "\n"))
    parts.append(Lit("<|assistant|>\n"))
    return _merged(parts)


def _merged(parts: list[Part]) -> Prompt:
    """Adjacent text parts joined (tokenizers see the text as one run), empty ones dropped;
    each run is joined once (appending to a growing text was quadratic in the turns)."""
    out: list[Part] = []
    run: list[str] = []
    for p in [*parts, None]:
        if isinstance(p, Lit):
            run.append(p.text)
            continue
        text = "".join(run)
        if text:
            out.append(Lit(text))
        run = []
        if p is not None:
            out.append(p)
    return tuple(out)
