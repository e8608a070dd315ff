"""The planner of one LLM operator: which calls to make, in what order, with which field
order — from the rows that reach the operator (after predicate ordering).

Rows with a NULL argument or an oversized cell get NULL and their error without a call;
the others become requests laid out instruction first (`templates.layout`), their fields
in the chosen order (argument order, the fixed ASL·N/C order, or GGR's per-group orders),
sorted when asked, deduplicated when asked.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from flowserve.sql.dedup import Dedup, dedup, no_dedup
from flowserve.sql.ggr import DEFAULT_GGR, GGRConfig, ggr
from flowserve.sql.options import Optimizations
from flowserve.sql.output import OutputSpec
from flowserve.sql.reorder import fixed_order, sort_rows
from flowserve.sql.templates import Template, field_text, layout
from flowserve.tokenize.words import word_ids

MAX_CELL_BYTES = 256 * 1024  # a larger cell is that row's error, not a 1 MB prompt


@dataclass(frozen=True, slots=True)
class LLMOp:
    """One LLM function call site of a statement."""

    fn: str  # LLM, LLM_FILTER, LLM_NUMBER, LLM_CHOICE, LLM_JSON
    template: Template
    output: OutputSpec
    max_tokens: int
    model: str | None = None

    @property
    def signature(self) -> str:
        return _digest(f"{self.fn}\x00{self.template.text}\x00{self.output}\x00{self.max_tokens}\x00{self.model}")


@dataclass(frozen=True, slots=True)
class Request:
    prompt: str
    parts: tuple[tuple[str, int], ...]  # (part key, tokens) in layout order: the prefix structure
    max_tokens: int
    after: int | None = None  # a request of the same batch that must finish first (its warm-up)
    warm: bool = False  # a prefix-only warm-up call: its answer is not used

    @property
    def tokens(self) -> int:
        return sum(t for _, t in self.parts)


@dataclass
class PlannedOp:
    op: LLMOp
    requests: list[Request]  # in send order
    row_request: list[int | None]  # per input row: its request, or None (see row_error)
    row_error: list[str | None]
    orders: Counter[tuple[str, ...]] = field(default_factory=Counter)  # column orders used → rows
    solver_s: float = 0.0
    dedup_saved: int = 0


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def token_count(text: str) -> int:
    """The simulator's token count (word pieces); the planner's estimates use it too."""
    return len(word_ids(text))


def _row_error(values: Sequence[Any], labels: Sequence[str], max_cell: int) -> str | None:
    for lab, v in zip(labels, values, strict=True):
        if v is None:
            return f"NULL in field {lab!r}"
        n = len(str(v).encode("utf-8", "surrogatepass"))
        if n > max_cell:
            return f"cell of {n} bytes in field {lab!r} exceeds the {max_cell}-byte limit"
    return None


def plan_op(op: LLMOp, rows: Sequence[Sequence[Any]], opts: Optimizations,
            ggr_cfg: GGRConfig = DEFAULT_GGR, max_cell: int = MAX_CELL_BYTES) -> PlannedOp:
    labels = op.template.labels
    n_cols = len(labels)
    errors = [_row_error(r, labels, max_cell) for r in rows]
    ok = [i for i, e in enumerate(errors) if e is None]
    table = [tuple(str(v) for v in rows[i]) for i in ok]
    t0 = time.perf_counter()
    natural = tuple(range(n_cols))
    if opts.ggr:
        arrangement = [(ok[k], order) for k, order in ggr(table, n_cols, ggr_cfg)]
    else:
        order = fixed_order(table, n_cols) if opts.reorder else natural
        local = sort_rows(table, order) if opts.sort else range(len(table))
        arrangement = [(ok[k], order) for k in local]
    solver_s = time.perf_counter() - t0
    suffix = op.output.instruction()
    instr_key = "i:" + op.signature
    instr_toks = token_count(op.template.instruction + "\n")
    suffix_toks = token_count(suffix) if suffix else 0
    prompts = []
    parts_of = []
    field_parts: dict[str, tuple[str, int]] = {}  # repeated cells are tokenized and hashed once
    orders: Counter[tuple[str, ...]] = Counter()
    for i, order in arrangement:
        values = [str(v) for v in rows[i]]
        prompts.append(layout(op.template, values, order, suffix))
        parts = [(instr_key, instr_toks)]
        for c in order:
            text = field_text(labels[c], values[c])
            part = field_parts.get(text)
            if part is None:
                part = field_parts[text] = ("f:" + _digest(text), token_count(text))
            parts.append(part)
        if suffix:
            parts.append(("s:" + op.signature, suffix_toks))
        parts_of.append(tuple(parts))
        orders[tuple(labels[c] for c in order)] += 1
    d: Dedup = dedup(prompts) if opts.dedup else no_dedup(len(prompts))
    requests = [Request(prompts[k], parts_of[k], op.max_tokens) for k in d.first]
    moved = list(range(len(requests)))
    if opts.warmup:
        requests, moved = warm_up(requests, op.template.instruction)
    row_request: list[int | None] = [None] * len(rows)
    for pos, (i, _) in enumerate(arrangement):
        row_request[i] = moved[d.index[pos]]
    return PlannedOp(op, requests, row_request, errors, orders, solver_s, d.saved)


def warm_up(requests: list[Request], instruction: str, min_shared: int = 16) -> tuple[list[Request], list[int]]:
    """Before each group of 2+ requests sharing instruction + first field (≥ min_shared
    tokens), a prefix-only call (1 output token) that the group's requests wait for:
    an engine admits a sorted group in one iteration and, without in-flight prefix
    sharing (vLLM), computes the shared prefix once per call; warmed, it is cached once.
    SGLang's `fork` warms a shared prefix the same way. Returns the requests and, per
    original request, its new position."""
    heads: dict[tuple[str, ...], list[int]] = {}
    for k, r in enumerate(requests):
        heads.setdefault(tuple(key for key, _ in r.parts[:2]), []).append(k)
    warm_of: dict[int, Request] = {}
    for members in heads.values():
        r = requests[members[0]]
        if len(members) >= 2 and sum(t for _, t in r.parts[:2]) >= min_shared:
            first_field = r.prompt[len(instruction) + 1:].split("\n", 1)[0]
            warm_of[members[0]] = Request(f"{instruction}\n{first_field}\n", r.parts[:2], 1, None, True)
    out: list[Request] = []
    moved: list[int] = []
    group_warm: dict[tuple[str, ...], int] = {}
    for k, r in enumerate(requests):
        head = tuple(key for key, _ in r.parts[:2])
        if k in warm_of:
            group_warm[head] = len(out)
            out.append(warm_of[k])
        moved.append(len(out))
        out.append(Request(r.prompt, r.parts, r.max_tokens, group_warm.get(head)))
    return out, moved
