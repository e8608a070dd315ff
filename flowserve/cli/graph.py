"""`flowserve graph show`: an app's workflow graph before and after graph passes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flowserve.cli.common import PLAIN_HELP, app, console, output_file, user_errors

graph_app = typer.Typer(**PLAIN_HELP, help="Workflow graphs of the built-in apps.")
app.add_typer(graph_app, name="graph")


@graph_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="search_gen, naive_rag or advanced_rag")],
    passes: Annotated[str, typer.Option(help="passes to apply: all, none, or a list")] = "all",
    png: Annotated[Path | None, output_file(help="draw both graphs into this PNG")] = None,
) -> None:
    """Print the app's graph (one query of its built-in workload) before and after the passes."""
    with user_errors():
        from flowserve.cli.graph_view import app_graph, describe, write_png

        before, after = app_graph(name, passes)
        console.print(f"{name}: module chain ({len(before)} nodes)", highlight=False)
        for n in before:
            console.print("  " + describe(n), highlight=False, markup=False)
        console.print(f"{name}: after passes {passes} ({len(after)} nodes)", highlight=False)
        for n in after:
            console.print("  " + describe(n), highlight=False, markup=False)
        if png is not None:
            write_png(before, after, name, passes, png)
            console.print(f"png: {png}")
