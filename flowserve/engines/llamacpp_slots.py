"""llama-server's `GET /slots`: what each slot holds, read as plain data.

llama-server keeps one sequence per slot and reuses it for the next prompt sharing its
prefix (`cache_prompt`). `/slots` answers a JSON array, one object per slot: `id`,
`n_ctx`, `is_processing` and, once a task ran there, `id_task`, `n_prompt_tokens`,
`params`, `next_token`. The slot's prompt as text (`prompt`, its special tokens written
out) comes only from builds before 2025 or, in later ones, when the server runs with
`LLAMA_SERVER_SLOTS_DEBUG=1`; without it a router learns the slots' sizes, not their
content. A server started with `--no-slots` answers 501; engines without slots 404.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class SlotsError(ValueError):
    """A `/slots` answer that is not what llama-server sends."""


@dataclass(frozen=True, slots=True)
class SlotState:
    """One slot: `prompt` is the text of its last task's prompt (None: not reported)."""

    id: int
    n_ctx: int
    processing: bool
    prompt: str | None = None
    prompt_tokens: int | None = None


def _int(entry: Mapping[str, Any], key: str, required: bool) -> int | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SlotsError(f"slot {key} must be a non-negative integer, not {value!r}")
    return value


def parse_slot(entry: Any) -> SlotState:
    if not isinstance(entry, Mapping):
        raise SlotsError(f"a slot must be an object, not {type(entry).__name__}")
    slot_id, n_ctx = _int(entry, "id", True), _int(entry, "n_ctx", True)
    assert slot_id is not None and n_ctx is not None
    processing = entry.get("is_processing", False)
    if not isinstance(processing, bool):
        raise SlotsError(f"slot is_processing must be a boolean, not {processing!r}")
    prompt = entry.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        raise SlotsError(f"slot prompt must be text, not {type(prompt).__name__}")
    return SlotState(slot_id, n_ctx, processing, prompt or None, _int(entry, "n_prompt_tokens", False))


def parse_slots(body: Any) -> list[SlotState]:
    """The slots of a `/slots` answer (its decoded JSON); `SlotsError` if it is not one."""
    if not isinstance(body, list):
        raise SlotsError(f"/slots must answer a JSON array, not {type(body).__name__}")
    slots = [parse_slot(e) for e in body]
    if len({s.id for s in slots}) != len(slots):
        raise SlotsError("/slots names a slot id twice")
    return slots
