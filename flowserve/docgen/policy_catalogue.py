"""The policy catalogue: every registered dispatch and queue policy with its docstring and
its constructor parameters (the names `--set dispatch.NAME=` and `dispatch_params:` take)."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping

from flowserve.core.policy import BINDINGS, DispatchPolicy, QueuePolicy
from flowserve.docgen.config_reference import type_name, yaml_value
from flowserve.policies import DISPATCH_POLICIES, QUEUE_POLICIES

INTRO = """\
# Policy catalogue

Generated from the policy registries (`flowserve.policies.DISPATCH_POLICIES` and
`QUEUE_POLICIES`; `python -m flowserve.docgen`). A **dispatch** policy picks the instance
for each ready LLM call (one for the whole cluster); a **queue** policy orders the calls
waiting at one instance (one per instance). Any dispatch policy combines with any queue
policy. Parameters are set with `--set dispatch.NAME=VALUE` / `--set queue.NAME=VALUE` on
the command line, or `dispatch_params:` / `queue_params:` in a serving YAML's `gateway:`
section.
"""


def policy_doc(cls: type) -> str:
    """The class's docstring, else its module's: what the policy does and where it comes from."""
    doc = cls.__doc__ if cls.__doc__ and cls.__doc__ is not object.__doc__ else inspect.getmodule(cls).__doc__
    return inspect.cleandoc(doc or "")


def parameter_rows(cls: type, kind: str) -> list[str]:
    hints = typing.get_type_hints(cls.__init__)
    rows = []
    for name, p in inspect.signature(cls).parameters.items():
        value = "required" if p.default is inspect.Parameter.empty else yaml_value(p.default)
        rows.append(f"| `{name}` | {type_name(hints.get(name, typing.Any))} | {value} |")
    if kind == "dispatch":
        binding = " \\| ".join(f"`{b}`" for b in BINDINGS)
        rows.append(f"| `binding` | {binding} | {yaml_value(cls.binding)} |")
    return rows


def policy_section(name: str, cls: type[DispatchPolicy] | type[QueuePolicy], kind: str) -> str:
    traits = [f"binds calls at `{cls.binding}` time"] if kind == "dispatch" else []
    if cls.uses_deadline:
        traits.append("reads deadlines")
    if cls.needs_prefix_index:
        traits.append("reads the router's prefix index")
    head = f"### `{name}` ({kind})\n\n`{cls.__module__}.{cls.__name__}`" + (f"; {', '.join(traits)}." if traits
                                                                              else ".")
    rows = parameter_rows(cls, kind)
    table = ("| parameter | type | default |\n|---|---|---|\n" + "\n".join(rows)) if rows else "No parameters."
    return f"{head}\n\n{policy_doc(cls)}\n\n{table}\n"


def policy_catalogue(registries: Mapping[str, Mapping[str, type]] | None = None) -> str:
    regs = registries or {"dispatch": DISPATCH_POLICIES, "queue": QUEUE_POLICIES}
    out = [INTRO]
    for kind, registry in regs.items():
        out.append(f"## {kind.capitalize()} policies\n\n" + ", ".join(f"`{n}`" for n in registry) + ".\n")
        out += [policy_section(name, cls, kind) for name, cls in registry.items()]
    return "\n".join(out)
