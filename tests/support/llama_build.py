"""Whether the tests' llama-server is built yet, and how long its build takes: the report
header (tests/conftest.py) and the llama fixtures (fixtures_llama.py) say it. Imports
nothing beyond the standard library, so every folder's tests can load it."""

from __future__ import annotations

import os

from flowserve.engines.llamacpp_build import binary_path

BUILD_NOTE = "about 5-7 minutes on 2 cores, once; cached afterwards"


def llama_server_cached() -> bool:
    return bool(os.environ.get("FLOWSERVE_LLAMA_SERVER")) or os.access(binary_path(), os.X_OK)


def report_header() -> str:
    if llama_server_cached():
        return f"llama-server: {os.environ.get('FLOWSERVE_LLAMA_SERVER') or binary_path()}"
    return (f"llama-server: not built yet; the first test that needs it (marked real_engine) builds it from "
            f"the llama-cpp-python sdist ({BUILD_NOTE}) into {binary_path().parent}")
