"""The fixture plugins of these tests: the Text-to-SQL agent's questions and scripted engine,
the retrieval components, a real llama-server (the agent on a real model). Loaded by this
folder, not by the whole suite, so that other folders run without these plugins'
dependencies; a plugin loads once per session and its session fixtures are shared by every
folder that loads it."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    for plugin in ("fixtures_text2sql", "fixtures_retrieval", "fixtures_llama"):
        config.pluginmanager.import_plugin(plugin)
