"""`flowserve bench live` refuses options it would otherwise ignore (nothing runs)."""

import pytest
from typer.testing import CliRunner

from flowserve.cli import app

runner = CliRunner()


@pytest.mark.parametrize(("args", "message"), [
    (["--parts", "overhead,foo"], "unknown 'foo'"),
    (["--peer", "sglang-router", "--parts", "overhead"], "runs the peer part alone"),
    (["--reps", "5"], "which is not chosen"),
    (["--parts", "overhead", "--slots", "2"], "which is not chosen"),
    (["--peer", "vllm-router"], "unknown 'vllm-router'"),
])
def test_options_that_would_be_ignored_are_refused(tmp_path, args, message):
    r = runner.invoke(app, ["bench", "live", *args, "--json", str(tmp_path / "live.json")])
    assert r.exit_code == 2 and message in r.output, r.output
    assert not (tmp_path / "live.json").exists()
