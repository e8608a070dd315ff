"""The fixture plugins of these tests: real llama-servers and the search service. Loaded by
this folder, not by the whole suite, so that other folders run without these plugins'
dependencies; a plugin loads once per session and its session fixtures are shared by every
folder that loads it."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    for plugin in ("fixtures_llama", "fixtures_retrieval"):
        config.pluginmanager.import_plugin(plugin)
