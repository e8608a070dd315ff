"""`flowserve graph show`: an app's graph before and after the passes, as text and a PNG."""

from __future__ import annotations

from typer.testing import CliRunner

from flowserve.cli import app


def test_graph_show_cli_prints_both_graphs_and_draws(tmp_path):
    png = tmp_path / "g.png"
    res = CliRunner().invoke(app, ["graph", "show", "naive_rag", "--passes", "all", "--png", str(png)])
    assert res.exit_code == 0, res.output
    assert "embed_docs#0" in res.output and "answer.prefill" in res.output and png.stat().st_size > 1000
    bad = CliRunner().invoke(app, ["graph", "show", "nope"])
    assert bad.exit_code == 2 and "unknown app 'nope'" in bad.output
