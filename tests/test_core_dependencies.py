"""`pytest tests/core tests/policies tests/graph tests/sim` needs only the core's dependencies
(numpy, scipy, pydantic, PyYAML; pytest and hypothesis to test): every module of the core's
packages imports, and those folders' tests collect, with every other third-party package
unimportable (tests/support/core_only.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from core_only import CORE_DEPENDENCIES, ROOT, CoreOnly, allowed_modules

CORE_FOLDERS = ("tests/core", "tests/policies", "tests/graph", "tests/sim")


def test_the_guard_refuses_what_the_core_does_not_need() -> None:
    allowed = allowed_modules()
    assert {"numpy", "scipy", "pydantic", "pydantic_core", "yaml", "pytest", "hypothesis"} <= allowed
    guard = CoreOnly(allowed)
    for name in ("httpx", "fastapi", "datasketch", "duckdb", "pyspark", "aiohttp", "uvicorn", "wordllama",
                 "usearch", "bm25s", "openai", "rich", "typer", "matplotlib", "pyarrow", "tokenizers"):
        with pytest.raises(ModuleNotFoundError, match="not one of the core's dependencies"):
            guard.find_spec(name)
    for name in ("numpy", "json", "flowserve", "helpers"):  # a dependency, the standard library, the repository's own
        assert guard.find_spec(name) is None


def test_the_core_folders_collect_with_only_the_core_dependencies() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "core_only.py"), "--collect-only",
                           "-p", "no:cacheprovider", *CORE_FOLDERS], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"needs more than {', '.join(CORE_DEPENDENCIES)}:\n{done.stdout[-4000:]}{done.stderr}"
    collected = re.search(r"(\d+) tests collected", done.stdout)
    assert collected and int(collected[1]) > 150, done.stdout[-2000:]  # the folders' tests, not an empty collection
