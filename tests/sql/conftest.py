"""The fixture plugins of these tests: a real llama-server (LLM-in-SQL on a real model).
Loaded by this folder, not by the whole suite; a plugin loads once per session and its
session fixtures are shared by every folder that loads it."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.import_plugin("fixtures_llama")
