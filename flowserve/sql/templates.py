"""Prompt templates of `LLM('instruction', col1, ...)` and the prompt layout.

The paper's form (Liu et al. §2): a plain instruction, the fields named after their
columns — `LLM('Is this movie for kids?', movie_info, review_content)`. Optionally the
instruction names its fields with placeholders, one per column argument, in argument
order: `'Is this movie for kids? {movie information} {user review}'`. A placeholder is a
name in braces without quotes, colons or line breaks, so a JSON example stays text
(`'Reply like {"label": "good"}'`); `{{` and `}}` are literal braces anywhere. The prompt
is laid out instruction first, then the fields as `name: value` lines in the planner's
order, so the shared prefix is the instruction plus the leading fields (SPEC §3.4, paper
§4).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from flowserve.sql.errors import SQLInputError

# an escaped brace, or a placeholder: a name in braces (no quotes, colons or line breaks: JSON stays text)
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}\"':\n]*)\}")


@dataclass(frozen=True, slots=True)
class Template:
    text: str
    labels: tuple[str, ...]  # one per column argument
    instruction: str  # the text with each placeholder replaced by its label


def parse_template(text: str, n_columns: int, names: Sequence[str] = ()) -> Template:
    """The template's fields: its placeholders, or without any, the columns' `names`
    (`field 1`, ... where none are given); a placeholder count that differs from the
    columns is an error."""
    if not isinstance(text, str) or not text.strip():
        raise SQLInputError("LLM(): the instruction must be a non-empty string literal")
    labels = [m.group(1).strip() for m in PLACEHOLDER.finditer(text) if m.group(1) is not None]
    if not labels and n_columns:
        return Template(text, column_labels(names, n_columns), _filled(text).strip())
    if any(not lab for lab in labels):
        raise SQLInputError(f"LLM(): empty placeholder '{{}}' in template {text[:80]!r} (write '{{{{}}}}' for "
                            f"literal braces)")
    if len(labels) != n_columns:
        raise SQLInputError(f"LLM(): template has {len(labels)} placeholder(s) {labels} but "
                            f"{n_columns} column argument(s) were given: {text[:80]!r}; name one placeholder "
                            f"per column, or none (the fields then follow as `column: value` lines)")
    if len(set(labels)) != len(labels):
        raise SQLInputError(f"LLM(): duplicate placeholder names {labels} in {text[:80]!r}")
    return Template(text, tuple(labels), _filled(text).strip())


def _filled(text: str) -> str:
    """The text with each placeholder replaced by its label and escaped braces unescaped."""
    return PLACEHOLDER.sub(lambda m: m.group(0)[0] if m.group(1) is None else m.group(1).strip(), text)


def column_labels(names: Sequence[str], n_columns: int) -> tuple[str, ...]:
    """One field name per column argument: its name, made unique by a suffix."""
    out: list[str] = []
    for i in range(n_columns):
        base = (names[i] if i < len(names) else "").strip() or f"field {i + 1}"
        label, k = base, 2
        while label in out:
            label, k = f"{base} ({k})", k + 1
        out.append(label)
    return tuple(out)


def field_text(label: str, value: str) -> str:
    return f"{label}: {value}\n"


def layout(template: Template, values: Sequence[str], order: Sequence[int], suffix: str = "") -> str:
    """Instruction first, then the fields in `order` (indices into the columns), then the
    output instruction (`suffix`) last so it never breaks the shared prefix."""
    fields = "".join(field_text(template.labels[i], values[i]) for i in order)
    return f"{template.instruction}\n{fields}{suffix}"
