"""Large inputs are parsed and tokenized off the event loop, so one big request does
not stall every other request's latency (`/health` took 12 s while a 50 MB body was
parsed). Small inputs stay on the loop: a thread hop costs more than they do."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
LARGE_BODY_BYTES = 256 * 1024  # a request body above this is decoded and validated in a thread
LARGE_TEXT_CHARS = 64 * 1024  # a text above this is tokenized in a thread
LARGE_CHAT_TURNS = 256  # a chat of more turns is laid out or rendered in a thread


async def off_loop(large: bool, fn: Callable[..., T], *args: object) -> T:
    """`fn(*args)`: in a worker thread when the input is `large`, else right here."""
    return await asyncio.to_thread(fn, *args) if large else fn(*args)
