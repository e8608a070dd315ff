"""`python -m flowserve.cli`: the `flowserve` command."""

from flowserve.cli import app

app()
