"""Shared pytest fixtures for tests against a real llama-server (load with `pytest_plugins`).

* `llama_server_binary` (session): the cached llama-server; the first session on a clean
  machine builds it (minutes), later ones reuse `~/.cache/flowserve/llama-server-VERSION`.
* `tiny_model` (session): the project's tiny random Llama (`TinyModel`: gguf, tokenizer_json).
* `llama_server` (session): one server, 2 slots, 4096 tokens of unified KV, 1 thread.
* `start_llama_server` (function): factory `start_llama_server(**LlamaServer kwargs)`; every
  server it started is stopped when the test ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flowserve.engines.llamacpp import LlamaServer, ensure_llama_server
from flowserve.engines.tinymodel import TinyModel, write_tiny_llama


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    return ensure_llama_server(progress=lambda msg: print(f"[llama-server] {msg}", flush=True))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> TinyModel:
    return write_tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny.gguf")


@pytest.fixture(scope="session")
def llama_server(llama_server_binary: Path, tiny_model: TinyModel,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with LlamaServer(tiny_model.gguf, ctx_size=4096, parallel=2, threads=1, alias=tiny_model.name,
                     binary=llama_server_binary, log_path=log) as server:
        yield server


@pytest.fixture
def start_llama_server(llama_server_binary: Path, tiny_model: TinyModel,
                       tmp_path: Path) -> Iterator[Callable[..., LlamaServer]]:
    started: list[LlamaServer] = []

    def start(**kwargs: object) -> LlamaServer:
        opts: dict = {"ctx_size": 4096, "parallel": 1, "threads": 1, "alias": tiny_model.name,
                      "binary": llama_server_binary, "log_path": tmp_path / f"llama-{len(started)}.log"} | kwargs
        server = LlamaServer(opts.pop("model", tiny_model.gguf), **opts)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()
