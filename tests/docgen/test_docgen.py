"""The generators of the reference pages, on hand-made inputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from flowserve.core.params import Help, undocumented
from flowserve.core.policy import Binding, DispatchPolicy
from flowserve.docgen.cli_reference import cli_reference
from flowserve.docgen.config_reference import model_section, type_name, yaml_value
from flowserve.docgen.policy_catalogue import policy_catalogue
from flowserve.policies import DISPATCH_POLICIES, QUEUE_POLICIES
from flowserve.policies.scoring import Decision, Scorer
from flowserve.schema import Strict


class Inner(Strict):
    """An inner model."""

    x: int = Field(1, description="an x")


class Outer(Strict):
    """An outer model."""

    n: Annotated[int, Field(ge=1)] = Field(4, le=8, description="a bounded count")
    mode: Literal["a", "b"] = Field("a", description="a choice")
    inner: Inner | None = Field(None, description="a nested model")
    names: list[str] = Field(default_factory=list, description="some names")
    weights: dict[str, float] = Field(default_factory=dict, description="a | pipe")
    on: bool = Field(True, description="a flag")
    needed: str = Field(description="no default")


def test_type_names_read_as_yaml() -> None:
    assert type_name(int) == "integer" and type_name(str | None) == "string or null"
    assert type_name(Literal["a", "b"]) == "`a` \\| `b`"
    assert type_name(list[str]) == "list of string"
    assert type_name(Mapping[str, float]) == "mapping of string to number"
    assert type_name(Inner | None) == "[Inner](#inner) or null"
    assert (yaml_value(True), yaml_value(None), yaml_value(""), yaml_value(0.5)) == ("`true`", "null", '`""`', "`0.5`")


def test_a_model_section_has_one_row_per_field_with_bounds_defaults_and_descriptions() -> None:
    lines = model_section(Outer).splitlines()
    assert lines[0] == "### Outer" and lines[2] == "An outer model."
    rows = [line for line in lines if line.startswith("| `")]
    assert rows == [
        "| `n` | integer (≥ 1, ≤ 8) | `4` | a bounded count |",
        "| `mode` | `a` \\| `b` | `a` | a choice |",
        "| `inner` | [Inner](#inner) or null | null | a nested model |",
        "| `names` | list of string | `[]` | some names |",
        "| `weights` | mapping of string to number | `{}` | a \\| pipe |",
        "| `on` | boolean | `true` | a flag |",
        "| `needed` | string | required | no default |",
    ]


class Picky(DispatchPolicy):
    """Sends every call to the instance with the most free slots."""

    name: ClassVar[str] = "picky"
    binding: Binding = "late"
    uses_deadline: ClassVar[bool] = True

    def __init__(self, slack: Annotated[float, Help("how much | slack")] = 0.5, mode: Literal["x", "y"] = "x") -> None:
        ...


class Shortest(Scorer):
    """Scores the shortest queue best."""

    name = "shortest"

    def __init__(self, cap: Annotated[int, Help("queues longer than this count as this")] = 8) -> None: ...

    def score(self, d: Decision) -> list[float]:
        return []


def test_the_catalogue_shows_each_policy_with_its_doc_parameters_help_and_binding() -> None:
    page = policy_catalogue({"dispatch": {"picky": Picky}, "queue": {}}, ["llmd"], {"scorer": {"shortest": Shortest}})
    section = page.split("### `picky` (dispatch)")[1]
    assert "binds calls at `late` time, reads deadlines." in section
    assert "Sends every call to the instance with the most free slots." in section
    assert "| `slack` | number | `0.5` | how much \\| slack |" in section
    assert "| `mode` | `x` \\| `y` | `x` |  |" in section
    assert "| `binding` | `ready` \\| `late` | `late` |" in section
    profile = page.split("### `llmd` (dispatch, scoring profile)")[1]
    assert "- {name: prefix_hit, weight: 3.0, block_size: 64}" in profile
    part = page.split("#### `shortest` (scorer)")[1]
    assert "Scores the shortest queue best." in part
    assert "| `cap` | integer | `8` | queues longer than this count as this |" in part


def test_every_parameter_of_every_policy_and_part_carries_help() -> None:
    from flowserve.policies.scoring import FILTERS, GUARDS, PICKERS, SCORERS

    classes = [*DISPATCH_POLICIES.values(), *QUEUE_POLICIES.values(), *FILTERS.values(), *SCORERS.values(),
               *PICKERS.values(), *GUARDS.values()]
    assert undocumented(classes) == []


def test_the_cli_reference_has_every_command() -> None:
    page = cli_reference()
    for cmd in ("flowserve simulate", "flowserve serve", "flowserve sql", "flowserve bench compare",
                "flowserve engines tiny-model"):
        assert f"## `{cmd}`" in page
    assert "<bool>" not in page


