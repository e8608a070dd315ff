"""The fixture plugins of these tests: a real llama-server to validate against, the
Text-to-SQL agent's questions and scripted engine. Loaded by this folder, not by the whole suite,
so that other folders run without these plugins' dependencies; a plugin loads once per
session and its session fixtures are shared by every folder that loads it."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    for plugin in ("fixtures_llama", "fixtures_text2sql"):
        config.pluginmanager.import_plugin(plugin)
