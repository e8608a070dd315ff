"""The command-line reference: every `flowserve` command's `--help`, as the user sees it."""

from __future__ import annotations

import click
import typer

from flowserve.cli import app

WIDTH = 88  # fixed, so the page does not depend on the terminal that generated it
INTRO = """\
# Command line

Generated from the commands themselves (`python -m flowserve.docgen`): each section is
the command's `--help`. Bad input exits with status 2 and one line naming the problem.
"""


def _walk(cmd: click.Command, path: list[str]) -> list[tuple[list[str], click.Command]]:
    out = [(path, cmd)]
    if hasattr(cmd, "list_commands"):  # a group (typer's own, not a click.Group)
        for name in cmd.list_commands(click.Context(cmd)):
            sub = cmd.get_command(click.Context(cmd), name)
            if sub is not None and not sub.hidden:
                out += _walk(sub, [*path, name])
    return out


def help_text(cmd: click.Command, path: list[str]) -> str:
    ctx = click.Context(cmd, info_name=" ".join(["flowserve", *path]), terminal_width=WIDTH,
                        max_content_width=WIDTH)
    return cmd.get_help(ctx)


def cli_reference() -> str:
    out = [INTRO]
    for path, cmd in _walk(typer.main.get_command(app), []):
        title = " ".join(["flowserve", *path])
        out.append(f"## `{title}`\n\n```text\n{help_text(cmd, path)}\n```\n")
    return "\n".join(out)
