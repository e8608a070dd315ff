"""Prompt templates of `LLM(template, col1, ...)` and the prompt layout.

A template names its fields with placeholders, one per column argument, in argument
order: `'Is this movie for kids? {movie information} {user review}'`. The prompt is laid
out instruction first, then the fields as `label: value` lines in the planner's order,
so the shared prefix is the instruction plus the leading fields (SPEC §3.4, paper §4).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from flowserve.sql.errors import SQLInputError

PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True, slots=True)
class Template:
    text: str
    labels: tuple[str, ...]  # one per column argument
    instruction: str  # the text with each placeholder replaced by its label


def parse_template(text: str, n_columns: int) -> Template:
    """The template's fields; a placeholder count that differs from the columns is an error."""
    if not isinstance(text, str) or not text.strip():
        raise SQLInputError("LLM(): the template must be a non-empty string literal")
    labels = [m.strip() for m in PLACEHOLDER.findall(text)]
    if any(not lab for lab in labels):
        raise SQLInputError(f"LLM(): empty placeholder '{{}}' in template {text[:80]!r}")
    if len(labels) != n_columns:
        raise SQLInputError(f"LLM(): template has {len(labels)} placeholder(s) {labels} but "
                            f"{n_columns} column argument(s) were given: {text[:80]!r}")
    if len(set(labels)) != len(labels):
        raise SQLInputError(f"LLM(): duplicate placeholder names {labels} in {text[:80]!r}")
    instruction = PLACEHOLDER.sub(lambda m: m.group(1).strip(), text).strip()
    return Template(text, tuple(labels), instruction)


def field_text(label: str, value: str) -> str:
    return f"{label}: {value}\n"


def layout(template: Template, values: Sequence[str], order: Sequence[int], suffix: str = "") -> str:
    """Instruction first, then the fields in `order` (indices into the columns), then the
    output instruction (`suffix`) last so it never breaks the shared prefix."""
    assert sorted(order) == list(range(len(values))), order
    fields = "".join(field_text(template.labels[i], values[i]) for i in order)
    return f"{template.instruction}\n{fields}{suffix}"
