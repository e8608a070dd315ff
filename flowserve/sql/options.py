"""Which planner optimisations a statement uses (each switchable: `optimize=none|all|LIST`)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from flowserve.sql.errors import SQLInputError


@dataclass(frozen=True, slots=True)
class Optimizations:
    dedup: bool = False  # one call per distinct prompt
    reorder: bool = False  # one column order for all rows by ASL·N/C
    ggr: bool = False  # per-group column orders (greedy group recursion)
    sort: bool = False  # rows sorted on the chosen field order
    predicates: bool = False  # cheap predicates first, LLM projections after filters and LIMIT
    warmup: bool = False  # a group's first call runs before the rest of its group (prefix in cache first)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in fields(self) if getattr(self, f.name))


ALL = Optimizations(True, True, True, True, True, True)
NONE = Optimizations()
NAMES = tuple(f.name for f in fields(Optimizations))


def parse_optimize(spec: str | Optimizations | None) -> Optimizations:
    """`none`, `all` or a comma list of names (dedup, reorder, ggr, sort, predicates, warmup)."""
    if isinstance(spec, Optimizations):
        return spec
    if spec is not None and not isinstance(spec, str):
        raise SQLInputError(f"optimize must be none, all or a comma list of names, got {type(spec).__name__}")
    text = (spec or "none").strip().lower()
    if text == "all":
        return ALL
    if text in ("none", ""):
        return NONE
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in NAMES]
    if bad:
        raise SQLInputError(f"optimize: unknown optimisation(s) {bad}; known: none, all, {', '.join(NAMES)}")
    return Optimizations(**{n: True for n in names})
