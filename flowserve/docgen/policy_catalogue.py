"""The policy catalogue: every registered dispatch and queue policy with its docstring and
its constructor parameters with their help (the names `--set dispatch.NAME=` and
`dispatch_params:` take), the shipped scoring profiles, and every filter, scorer, picker
and guard a profile may name."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence

import yaml

from flowserve.core.params import REQUIRED, parameters
from flowserve.core.policy import BINDINGS, DispatchPolicy, QueuePolicy
from flowserve.docgen.config_reference import type_name, yaml_value
from flowserve.policies import DISPATCH_POLICIES, QUEUE_POLICIES
from flowserve.policies.registry import PROFILES
from flowserve.policies.scoring import FILTERS, GUARDS, PICKERS, SCORERS, CostScorer, shipped_profile
from flowserve.policies.scoring.plugin import Plugin

INTRO = """\
# Policy catalogue

Generated from the policy registries (`flowserve.policies.DISPATCH_POLICIES`, the
shipped scoring profiles, `QUEUE_POLICIES` and the scoring catalogue, `flowserve.policies.scoring`; `python -m
flowserve.docgen`). A **dispatch** policy picks the instance for each ready LLM call (one
for the whole cluster); a **queue** policy orders the calls waiting at one instance (one
per instance). Any dispatch policy combines with any queue policy. Parameters are set with
`--set dispatch.NAME=VALUE` / `--set queue.NAME=VALUE` on the command line, or
`dispatch_params:` / `queue_params:` in a serving YAML's `gateway:` section. A dispatch
policy may also be a [scoring profile](../policies.md#dispatch-profiles-filters-scorers-a-picker):
its parts' parameters are set as `PART.PARAM` (`--set dispatch.prefix_hit.weight=3`).
"""


def policy_doc(cls: type) -> str:
    """The class's docstring, else its module's: what the policy does and where it comes from."""
    doc = cls.__doc__ if cls.__doc__ and cls.__doc__ is not object.__doc__ else inspect.getmodule(cls).__doc__
    return inspect.cleandoc(doc or "")


def parameter_rows(cls: type, kind: str = "") -> list[str]:
    rows = []
    for p in parameters(cls):
        value = "required" if p.default is REQUIRED else yaml_value(p.default)
        rows.append(f"| `{p.name}` | {type_name(p.annotation)} | {value} | {p.help.replace('|', chr(92) + '|')} |")
    if kind == "dispatch":
        binding = " \\| ".join(f"`{b}`" for b in BINDINGS)
        rows.append(f"| `binding` | {binding} | {yaml_value(cls.binding)} | bind a call when it is ready, or "
                    "late: when some instance has room |")
    return rows


def parameter_table(rows: Sequence[str]) -> str:
    return ("| parameter | type | default | help |\n|---|---|---|---|\n" + "\n".join(rows)) if rows \
        else "No parameters."


def policy_section(name: str, cls: type[DispatchPolicy] | type[QueuePolicy], kind: str) -> str:
    traits = [f"binds calls at `{cls.binding}` time"] if kind == "dispatch" else []
    if cls.uses_deadline:
        traits.append("reads deadlines")
    if cls.needs_prefix_index:
        traits.append("reads the router's prefix index")
    head = f"### `{name}` ({kind})\n\n`{cls.__module__}.{cls.__name__}`" + (f"; {', '.join(traits)}." if traits
                                                                              else ".")
    return f"{head}\n\n{policy_doc(cls)}\n\n{parameter_table(parameter_rows(cls, kind))}\n"


def profile_section(name: str) -> str:
    spec = shipped_profile(name)
    body = {k: v for k, v in spec.describe().items() if k not in ("name", "description") and v not in ([], None)}
    text = yaml.safe_dump(body, sort_keys=False, default_flow_style=None, width=100).strip()
    return (f"### `{name}` (dispatch, scoring profile)\n\n`flowserve/policies/scoring/shipped/{name}.yaml`; "
            f"binds calls at `ready` time.\n\n{spec.description}\n\n```yaml\n{text}\n```\n")


def part_section(kind: str, name: str, cls: type[Plugin]) -> str:
    traits = []
    if issubclass(cls, CostScorer):
        traits.append(f"a cost in `{cls.unit}`")
    if cls.uses_deadline:
        traits.append("reads deadlines")
    if cls.needs_prefix_index:
        traits.append("reads the router's prefix index")
    head = f"#### `{name}` ({kind})\n\n`{cls.__module__}.{cls.__name__}`" + (f"; {', '.join(traits)}." if traits
                                                                               else ".")
    return f"{head}\n\n{policy_doc(cls)}\n\n{parameter_table(parameter_rows(cls))}\n"


def scoring_parts(parts: Mapping[str, Mapping[str, type[Plugin]]] | None = None) -> str:
    kinds = parts or {"filter": FILTERS, "scorer": SCORERS, "picker": PICKERS, "guard": GUARDS}
    out = ["## Scoring parts\n\nWhat a scoring profile names: filters, scorers (by weight), a picker and "
           "guards (`flowserve.policies.scoring.catalog`).\n"]
    for kind, registry in kinds.items():
        out.append(f"### {kind.capitalize()}s\n\n" + ", ".join(f"`{n}`" for n in registry) + ".\n")
        out += [part_section(kind, name, cls) for name, cls in registry.items()]
    return "\n".join(out)


def policy_catalogue(registries: Mapping[str, Mapping[str, type]] | None = None,
                     profiles: Sequence[str] | None = None,
                     parts: Mapping[str, Mapping[str, type[Plugin]]] | None = None) -> str:
    regs = registries or {"dispatch": DISPATCH_POLICIES, "queue": QUEUE_POLICIES}
    shipped = PROFILES if profiles is None else profiles
    out = [INTRO]
    for kind, registry in regs.items():
        names = [*registry, *(shipped if kind == "dispatch" else ())]
        out.append(f"## {kind.capitalize()} policies\n\n" + ", ".join(f"`{n}`" for n in names) + ".\n")
        out += [policy_section(name, cls, kind) for name, cls in registry.items()]
        if kind == "dispatch":
            out += [profile_section(name) for name in shipped]
    out.append(scoring_parts(parts))
    return "\n".join(out)
