"""The parts a profile names: every built-in filter, scorer, picker and guard by name, and
the user's own by import path (`package.module:Class`, deriving from the kind's base
class in `flowserve.policies.scoring.plugin`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from flowserve.core.params import construct
from flowserve.errors import ConfigError
from flowserve.plugins import is_import_path, load_class
from flowserve.policies.scoring.filters.cache_affinity import CacheAffinity
from flowserve.policies.scoring.filters.fits_context import FitsContext
from flowserve.policies.scoring.filters.gate_open import GateOpen
from flowserve.policies.scoring.filters.healthy import Healthy
from flowserve.policies.scoring.filters.role import RoleFilter
from flowserve.policies.scoring.filters.serves_model import ServesModel
from flowserve.policies.scoring.guards.hbal import LoadBalanceGuard
from flowserve.policies.scoring.guards.pin import PinPrefix
from flowserve.policies.scoring.pickers.max_score import MaxScore
from flowserve.policies.scoring.pickers.top_k_random import TopKRandom
from flowserve.policies.scoring.plugin import Filter, Guard, Picker, Plugin, Scorer
from flowserve.policies.scoring.scorers.active_blocks import ActiveBlocks
from flowserve.policies.scoring.scorers.affinity import SessionAffinity
from flowserve.policies.scoring.scorers.batch_harm import BatchHarm
from flowserve.policies.scoring.scorers.finish import ExpectedFinish
from flowserve.policies.scoring.scorers.kv_free import KVFree
from flowserve.policies.scoring.scorers.outstanding import Outstanding
from flowserve.policies.scoring.scorers.prefill_blocks import PrefillBlocks
from flowserve.policies.scoring.scorers.prefill_harm import PrefillHarm
from flowserve.policies.scoring.scorers.prefix_hit import PrefixHit
from flowserve.policies.scoring.scorers.queue_depth import QueueDepth
from flowserve.policies.scoring.scorers.speculative_hit import SpeculativeHit
from flowserve.policies.scoring.scorers.uncached_work import UncachedWork

PartKind = Literal["filter", "scorer", "picker", "guard"]

FILTERS: dict[str, type[Filter]] = {c.name: c for c in (Healthy, FitsContext, GateOpen, ServesModel, RoleFilter,
                                                         CacheAffinity)}
SCORERS: dict[str, type[Scorer]] = {c.name: c for c in (
    ExpectedFinish, Outstanding, BatchHarm, PrefillHarm, UncachedWork, PrefixHit, SpeculativeHit, KVFree, QueueDepth,
    SessionAffinity, PrefillBlocks, ActiveBlocks)}
PICKERS: dict[str, type[Picker]] = {c.name: c for c in (MaxScore, TopKRandom)}
GUARDS: dict[str, type[Guard]] = {c.name: c for c in (PinPrefix, LoadBalanceGuard)}
PARTS: dict[PartKind, tuple[Mapping[str, type[Plugin]], type[Plugin]]] = {
    "filter": (FILTERS, Filter), "scorer": (SCORERS, Scorer), "picker": (PICKERS, Picker), "guard": (GUARDS, Guard)}


def part_class(kind: PartKind, name: str) -> type[Plugin]:
    """The class a profile's `name` means: a built-in part of that kind, or an import path."""
    registry, base = PARTS[kind]
    cls = registry.get(name)
    if cls is not None:
        return cls
    if is_import_path(name):
        return load_class(name, base, kind)
    raise ConfigError(f"unknown {kind} {name!r}; known: {', '.join(registry)}, or an import path "
                      "'package.module:Class'")


def build_part(kind: PartKind, name: str, params: Mapping[str, Any], where: str) -> Plugin:
    """A new part: `name`'s class built from `params`; errors start with `where`."""
    try:
        cls = part_class(kind, name)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
    return construct(cls, params, f"{where} ({kind} {name!r})")
