"""The whole suite's configuration: only the report header, so that a folder of tests needs
nothing beyond what its own tests use. Each folder's conftest loads the fixture plugins
(tests/support/fixtures_*.py) its tests use."""

from __future__ import annotations

import contextlib

import pytest

# lightgbm before usearch (which the gateway imports): loaded after it, LightGBM names every feature 'Column_' and
# refuses its datasets (`flowserve.predict.latency_models` says so); absent where only the core's dependencies are
with contextlib.suppress(ImportError):
    import lightgbm  # noqa: F401
from llama_build import report_header


def pytest_report_header(config: pytest.Config) -> str:
    return report_header()
