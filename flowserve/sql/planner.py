"""The planner of one LLM operator: which calls to make, in what order, with which field
order — from the rows that reach the operator (after predicate ordering).

Rows with a NULL argument or an oversized cell get NULL and their error without a call.
For the others, each candidate plan (`candidates.py`: original order, sort, column
reordering, GGR, each with rows in table order or grouped; grouped ones also with prefix
warm-up calls) is laid out instruction first (`templates.layout`), deduplicated when
asked, and its cost estimated with the engines' prefix-sharing model
(`engine_model.estimate_send`). The fastest is kept; the original order unless another
is estimated at least `MARGIN` faster, so planning never loses to the table's own order
by more than the model's error.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from flowserve.sql.candidates import Candidate, candidates
from flowserve.sql.dedup import dedup, no_dedup
from flowserve.sql.engine_model import Call, EngineShape, Parts, estimate_send
from flowserve.sql.estimate import token_hit_rate
from flowserve.sql.ggr import DEFAULT_GGR, GGRConfig
from flowserve.sql.options import Optimizations
from flowserve.sql.output import OutputSpec
from flowserve.sql.templates import Template, field_text, layout
from flowserve.tokenize.words import word_ids

MAX_CELL_BYTES = 256 * 1024  # a larger cell is that row's error, not a 1 MB prompt
MARGIN = 0.02  # a plan other than the original must be estimated this much faster
WARMUP_MIN_SHARED = 16  # tokens of instruction + first field that make a group's warm-up worth a call


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
    parts: Parts  # (part key, tokens) in layout order: the prefix structure
    max_tokens: int
    after: int | None = None  # a request of the same batch that must finish first (its warm-up)
    warm: bool = False  # a prefix-only warm-up call: its answer is not used

    @property
    def tokens(self) -> int:
        return sum(t for _, t in self.parts)


@dataclass(frozen=True, slots=True)
class Estimate:
    """One candidate plan's estimate (engine model), as `--explain` shows it."""

    plan: str
    calls: int
    prompt_tokens: int
    hit_tokens: int
    time_s: float
    solver_s: float

    @property
    def hit_rate(self) -> float:
        return token_hit_rate(self.hit_tokens, self.prompt_tokens)


@dataclass
class PlannedOp:
    op: LLMOp
    requests: list[Request]  # in send order
    row_request: list[int | None]  # per input row: its request, or None (see row_error)
    row_error: list[str | None]
    orders: Counter[tuple[str, ...]] = field(default_factory=Counter)  # column orders used → rows
    solver_s: float = 0.0
    dedup_saved: int = 0
    estimates: list[Estimate] = field(default_factory=list)  # every candidate's, in candidate order
    chosen: str = "original"


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


@dataclass
class _Variant:
    """A candidate laid out: its distinct calls in send order and where each row went."""

    name: str
    cand: Candidate
    slots: list[int | None]  # per send slot: its position in the candidate's arrangement (None: warm-up)
    parts: list[Parts]
    after: list[int | None]
    row_slot: list[int]  # per arranged row: its send slot
    saved: int


def plan_op(op: LLMOp, rows: Sequence[Sequence[Any]], opts: Optimizations, ggr_cfg: GGRConfig = DEFAULT_GGR,
            shape: EngineShape | None = None, max_cell: int = MAX_CELL_BYTES) -> PlannedOp:
    labels = op.template.labels
    errors = [_row_error(r, labels, max_cell) for r in rows]
    ok = [i for i, e in enumerate(errors) if e is None]
    table = [tuple(str(v) for v in rows[i]) for i in ok]
    suffix = op.output.instruction()
    head = ("i:" + op.signature, token_count(op.template.instruction + "\n"))
    tail = (("s:" + op.signature, token_count(suffix)),) if suffix else ()
    cells: dict[tuple[int, str], tuple[str, int]] = {}  # a repeated cell is tokenized and hashed once

    def parts_of(k: int, order: tuple[int, ...]) -> Parts:
        out = [head]
        for c in order:
            v = table[k][c]
            p = cells.get((c, v))
            if p is None:
                text = field_text(labels[c], v)
                p = cells[(c, v)] = ("f:" + _digest(text), token_count(text))
            out.append(p)
        return (*out, *tail)

    variants: list[_Variant] = []
    for cand in candidates(table, len(labels), opts, ggr_cfg):
        parts = [parts_of(k, order) for k, order in cand.arrangement]
        d = dedup(parts) if opts.dedup else no_dedup(len(parts))
        plain = _Variant(cand.name, cand, list(d.first), [parts[k] for k in d.first], [None] * len(d.first),
                         list(d.index), d.saved)
        variants.append(plain)
        warm = _warm_up(plain) if opts.warmup and cand.grouped else plain
        if len(warm.parts) > len(plain.parts):
            variants.append(warm)
    out_tokens = max(1, op.max_tokens // 2)  # the model's answer length: half the cap
    estimates = [_estimate(v, out_tokens, shape) for v in variants]
    best = _choose(estimates)
    solver_s = sum({id(x.cand): x.cand.solver_s for x in variants}.values())
    return _build(op, variants[best], table, ok, errors, suffix, estimates, solver_s)


def _estimate(v: _Variant, out_tokens: int, shape: EngineShape | None) -> Estimate:
    calls = [Call(p, 1 if s is None else out_tokens, a) for p, s, a in zip(v.parts, v.slots, v.after, strict=True)]
    if shape is None:
        prompt = sum(c.tokens for c in calls)
        return Estimate(v.name, len(calls), prompt, 0, 0.0, v.cand.solver_s)
    e = estimate_send(calls, shape)
    return Estimate(v.name, e.calls, e.prompt_tokens, e.hit_tokens, e.time_s, v.cand.solver_s)


def _choose(estimates: Sequence[Estimate]) -> int:
    """The fastest candidate; the original (first) unless another is `MARGIN` faster."""
    best = min(range(len(estimates)), key=lambda i: (estimates[i].time_s, i))
    return best if estimates[best].time_s < estimates[0].time_s * (1 - MARGIN) else 0


def _warm_up(v: _Variant) -> _Variant:
    """Before each group of 2+ calls sharing instruction + first field (≥ WARMUP_MIN_SHARED
    tokens), a prefix-only call (1 output token) that the group's calls wait for: an engine
    admits a sorted group in one iteration and computes a prefix once per call in flight;
    warmed, it is computed once. SGLang's `fork` warms a shared prefix the same way."""
    members: Counter[tuple[str, ...]] = Counter(tuple(k for k, _ in p[:2]) for p in v.parts)
    slots: list[int | None] = []
    parts: list[Parts] = []
    after: list[int | None] = []
    moved: list[int] = []
    warm_at: dict[tuple[str, ...], int] = {}
    for s, p in zip(v.slots, v.parts, strict=True):
        key = tuple(k for k, _ in p[:2])
        if key not in warm_at and members[key] >= 2 and key[-1].startswith("f:") and \
                sum(t for _, t in p[:2]) >= WARMUP_MIN_SHARED:
            warm_at[key] = len(parts)
            slots.append(None)
            parts.append(p[:2])
            after.append(None)
        moved.append(len(parts))
        slots.append(s)
        parts.append(p)
        after.append(warm_at.get(key))
    return _Variant(v.name + "+warmup", v.cand, slots, parts, after, [moved[i] for i in v.row_slot], v.saved)


def _build(op: LLMOp, v: _Variant, table: list[tuple[str, ...]], ok: list[int], errors: list[str | None],
           suffix: str, estimates: list[Estimate], solver_s: float) -> PlannedOp:
    tmpl = op.template
    arrangement = v.cand.arrangement
    requests: list[Request] = []
    for i, (slot, parts, after) in enumerate(zip(v.slots, v.parts, v.after, strict=True)):
        if slot is None:  # a warm-up: its group's first call's prompt up to the end of the first field
            k, order = arrangement[v.slots[i + 1]]  # type: ignore[index]
            prompt = f"{tmpl.instruction}\n{field_text(tmpl.labels[order[0]], table[k][order[0]])}"
            requests.append(Request(prompt, parts, 1, None, True))
        else:
            k, order = arrangement[slot]
            requests.append(Request(layout(tmpl, table[k], order, suffix), parts, op.max_tokens, after))
    row_request: list[int | None] = [None] * len(errors)
    orders: Counter[tuple[str, ...]] = Counter()
    for pos, (k, order) in enumerate(arrangement):
        row_request[ok[k]] = v.row_slot[pos]
        orders[tuple(tmpl.labels[c] for c in order)] += 1
    return PlannedOp(op, requests, row_request, errors, orders, solver_s, v.saved, estimates, v.name)
