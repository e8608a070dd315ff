"""Dispatch as composed scorers (llm-d's filter → score → pick): filters, scorers, pickers
and guards, one per module, composed by weight in a profile (`profile`), run by
`ScoredDispatch`. The contract of a part is `plugin`; the built-in parts are in `catalog`."""

from flowserve.policies.scoring.catalog import FILTERS, GUARDS, PICKERS, SCORERS, build_part, part_class
from flowserve.policies.scoring.dispatch import ScoredDispatch
from flowserve.policies.scoring.plugin import CostScorer, Decision, Filter, Guard, Picker, Plugin, Scorer
from flowserve.policies.scoring.profile import (
    PartSpec,
    ProfileSpec,
    load_profile,
    looks_like_path,
    parse_profile,
    shipped_names,
    shipped_profile,
    with_params,
)

__all__ = [
    "FILTERS",
    "GUARDS",
    "PICKERS",
    "SCORERS",
    "CostScorer",
    "Decision",
    "Filter",
    "Guard",
    "PartSpec",
    "Picker",
    "Plugin",
    "ProfileSpec",
    "ScoredDispatch",
    "Scorer",
    "build_part",
    "load_profile",
    "looks_like_path",
    "parse_profile",
    "part_class",
    "shipped_names",
    "shipped_profile",
    "with_params",
]
