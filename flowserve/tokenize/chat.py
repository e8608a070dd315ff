"""Chat messages → prompt text for engines without a chat template of their own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class ChatTokenizer(Protocol):
    """What the router asks of an engine: its token ids for a text and its rendering of a chat."""

    async def encode(self, text: str) -> list[int]: ...

    async def render_chat(self, messages: Sequence[dict[str, Any]]) -> str: ...


def render_chat_plain(messages: Sequence[dict[str, Any]]) -> str:
    """A neutral chat layout for engines without a template: one `<|role|>` block each."""
    parts = [f"<|{m.get('role', 'user')}|>\n{message_text(m)}\n" for m in messages]
    return "".join(parts) + "<|assistant|>\n"


def message_text(m: dict[str, Any]) -> str:
    """A message's content as text (OpenAI allows a string or a list of text parts)."""
    content = m.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))
