"""What every `flowserve` command shares: the apps, consoles, the bad-input rule (exit 2
with one line naming the problem) and progress bars."""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, NoReturn

import click
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from flowserve import __version__
from flowserve.cluster import BUILTIN_CLUSTERS
from flowserve.errors import FlowserveError
from flowserve.output_paths import check_output
from flowserve.policies import DISPATCH_NAMES as DISPATCH
from flowserve.policies import QUEUE_POLICIES

CLUSTER_NAMES = ", ".join(BUILTIN_CLUSTERS)
CLUSTER_HELP = f"cluster or serving YAML (its gateway: section is ignored), or a built-in name: {CLUSTER_NAMES}"
DISPATCH_NAMES = ", ".join(DISPATCH) + ", or a scoring profile (FILE.yaml)"
QUEUE_NAMES = ", ".join(QUEUE_POLICIES)


class WholeSentenceGroup(typer.core.TyperGroup):
    """Lists each command with its whole first sentence, wrapped (click cuts it at the
    terminal's width with '...')."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, cmd.get_short_help_str(limit=1000))
                for name in self.list_commands(ctx) if (cmd := self.get_command(ctx, name)) and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


# Plain help (no rich panels): typer's rich panels print a type placeholder after every
# flag (`--quick <bool>`) and keep the line breaks of docstrings mid-sentence.
PLAIN_HELP: dict[str, Any] = {"no_args_is_help": True, "rich_markup_mode": None, "cls": WholeSentenceGroup}
app = typer.Typer(**PLAIN_HELP, add_completion=False,
                  help="Serve and simulate LLM applications on heterogeneous clusters.\n\n"
                       f"Dispatch policies: {DISPATCH_NAMES}.\n\nQueue policies: {QUEUE_NAMES}.")
bench_app = typer.Typer(**PLAIN_HELP, help="Benchmarks (print ratios, write JSON).")
app.add_typer(bench_app, name="bench")
engines_app = typer.Typer(**PLAIN_HELP,
                          help="Real engines: build llama-server, get a real model, write the tiny test model.")
app.add_typer(engines_app, name="engines")
tune_app = typer.Typer(**PLAIN_HELP, help="Tune policy parameters by simulation.")
app.add_typer(tune_app, name="tune")
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def _print_version(value: bool) -> None:
    if value:
        console.print(f"flowserve {installed_version()}", highlight=False)
        raise typer.Exit()


def installed_version() -> str:
    try:
        return metadata.version("flowserve")
    except metadata.PackageNotFoundError:
        return __version__


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    pass


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    try:
        yield
    except FlowserveError as e:
        _one_line(str(e))
    except OSError as e:  # a file that could not be read or written after all (a race, a full disk)
        if e.filename is None:
            raise
        _one_line(f"{e.filename}: {e.strerror}")


def _one_line(message: str) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {escape(' '.join(message.split()))}", highlight=False, markup=True,
                      soft_wrap=True)
    raise typer.Exit(2) from None


def _checked(folder: bool) -> Callable[[typer.Context, typer.CallbackParam, Any], Any]:
    # a plain function: typer reads a callback's signature and type hints, which a callable
    # object has not
    def check(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
        if value is not None and not ctx.resilient_parsing:
            with user_errors():
                check_output(Path(value), max(param.opts, key=len), folder)
        return value
    return check


_CHECK_FILE, _CHECK_FOLDER = _checked(folder=False), _checked(folder=True)
# which output an option's callback checks (the CLI's tests find the checked options by it)
OUTPUT_CHECKS: dict[Callable[..., Any], str] = {_CHECK_FILE: "file", _CHECK_FOLDER: "folder"}


def output_file(*decls: str, **kw: Any) -> Any:
    """`typer.Option` of a file the command writes, checked before the command runs."""
    return typer.Option(*decls, callback=_CHECK_FILE, **kw)


def output_folder(*decls: str, **kw: Any) -> Any:
    """`typer.Option` of a folder the command writes into, checked before it runs."""
    return typer.Option(*decls, callback=_CHECK_FOLDER, **kw)


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err_console, transient=True,
                    disable=not sys.stderr.isatty())


def parse_scales(text: str) -> list[float]:
    from flowserve.errors import ConfigError

    try:
        scales = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--slo-scales: expected comma-separated numbers, got {text!r}") from None
    if not scales or any(not math.isfinite(s) or s <= 0 for s in scales):
        raise ConfigError(f"--slo-scales: need positive finite numbers, got {text!r}")
    if len(scales) > 100:
        raise ConfigError(f"--slo-scales: {len(scales)} scales; at most 100 (each deadline-aware policy "
                          "simulates once per scale)")
    return scales


DEFAULT_SCALES = "1,1.5,2,3,4,5,6,8,10,12,15,20,25,30,40,50"
