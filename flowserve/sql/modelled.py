"""Modelled answers of simulated LLM calls: a simulated engine produces token counts, not
text, so a simulated statement's values come from here — deterministic in the prompt and
the seed, shaped by the requested output (Yes/No, a choice, a number, a JSON object)."""

from __future__ import annotations

import json
import zlib

from flowserve.sql.output import OutputSpec

TEXT_WORDS = ("the", "movie", "review", "suggests", "viewers", "who", "enjoy", "this", "would", "like")


def _draw(prompt: str, seed: int) -> int:
    return zlib.crc32(f"{seed}\x00{prompt}".encode("utf-8", "surrogatepass"))


def modelled_answer(prompt: str, spec: OutputSpec, seed: int, max_tokens: int) -> tuple[str, int]:
    """(answer text, output tokens) of a simulated call."""
    h = _draw(prompt, seed)
    if spec.kind == "bool":
        return ("Yes" if h % 2 else "No"), 2
    if spec.kind == "choice":
        return spec.choices[h % len(spec.choices)], 2
    if spec.kind == "number":
        return str(h % 6), 2
    if spec.kind == "json":
        obj = {k: _json_value(p, h) for k, p in (spec.schema.get("properties") or {}).items()}
        text = json.dumps(obj, sort_keys=True)
        return text, min(max_tokens, 4 + 3 * len(obj))
    n = min(max_tokens, 16 + h % 48)
    return " ".join(TEXT_WORDS[(h + k) % len(TEXT_WORDS)] for k in range(n)), n


def _json_value(prop: object, h: int) -> object:
    if not isinstance(prop, dict):
        return None
    if prop.get("enum"):
        return prop["enum"][h % len(prop["enum"])]
    return {"string": "modelled", "number": float(h % 6), "integer": h % 6,
            "boolean": bool(h % 2), "array": [], "object": {}}.get(prop.get("type", "string"))
