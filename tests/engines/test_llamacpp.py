import stat
import subprocess
import threading
from pathlib import Path

import httpx
import pytest

from flowserve.engines import llamacpp_build
from flowserve.engines.llamacpp_build import ensure_llama_server
from flowserve.engines.llamacpp_server import LlamaServer
from flowserve.errors import FlowserveError


@pytest.mark.real_engine
def test_server_is_healthy_on_localhost_and_reports_its_slots(llama_server):
    assert llama_server.base_url.startswith("http://127.0.0.1:")
    props = httpx.get(f"{llama_server.base_url}/props").json()
    assert props["total_slots"] == 2
    assert httpx.get(f"{llama_server.base_url}/health").status_code == 200


@pytest.mark.real_engine
def test_sequence_context_matches_the_server_in_both_kv_layouts(llama_server, start_llama_server):
    split = start_llama_server(ctx_size=4096, parallel=2, kv_unified=False)
    for server, expected in ((llama_server, 4096), (split, 2048)):
        props = httpx.get(f"{server.base_url}/props").json()
        assert props["default_generation_settings"]["n_ctx"] == server.seq_context == expected
        assert server.kv_capacity_tokens == 4096


@pytest.mark.real_engine
def test_stop_ends_the_process_and_frees_the_port(start_llama_server):
    server = start_llama_server()
    url, proc_pid = server.base_url, server.pid
    assert server.running and proc_pid
    server.stop()
    assert not server.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/health")


@pytest.mark.real_engine
def test_bad_arguments_fail_with_the_log_tail(start_llama_server):
    with pytest.raises(FlowserveError, match="exited with code") as err:
        start_llama_server(extra_args=["--no-such-flag"])
    assert "no-such-flag" in str(err.value)


@pytest.mark.real_engine
def test_missing_model_is_a_clear_error(start_llama_server, tmp_path):
    with pytest.raises(FlowserveError, match="does not exist"):
        start_llama_server(model=tmp_path / "nope.gguf")


def test_env_binary_overrides_the_cache(monkeypatch, tmp_path):
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\n")
    monkeypatch.setenv("FLOWSERVE_LLAMA_SERVER", str(fake))
    with pytest.raises(FlowserveError, match="not an executable"):
        ensure_llama_server()
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert ensure_llama_server() == fake


def test_missing_build_tools_are_named(monkeypatch, tmp_path):
    monkeypatch.delenv("FLOWSERVE_LLAMA_SERVER", raising=False)
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(llamacpp_build.shutil, "which", lambda _name: None)
    with pytest.raises(FlowserveError, match=r"needs cmake, a C compiler .*, a C\+\+ compiler"):
        ensure_llama_server("0.0.0-test", cache_dir=tmp_path)


def test_concurrent_callers_build_once(monkeypatch, tmp_path):
    """The second caller enters while the first is building; it says that it waits, then reuses."""
    monkeypatch.delenv("FLOWSERVE_LLAMA_SERVER", raising=False)
    builds: list[str] = []
    heard: list[str] = []
    second_waiting = threading.Event()

    def say(msg):
        heard.append(msg)
        if msg.startswith("waiting for another process"):
            second_waiting.set()

    def fake_build(src, build, log, jobs, say):
        builds.append(threading.current_thread().name)
        assert second_waiting.wait(10), "second caller never said it waits"
        out = build / "bin" / "llama-server"
        out.parent.mkdir(parents=True)
        out.write_text("#!/bin/sh\n")
        out.chmod(0o755)
        log.write_text("ok\n")
        return out

    monkeypatch.setattr(llamacpp_build, "_require_tools", lambda: None)
    monkeypatch.setattr(llamacpp_build, "fetch_sdist", lambda version, root, say: root / "sdist.tar.gz")
    monkeypatch.setattr(llamacpp_build, "_extract_llama_cpp", lambda sdist, work: work)
    monkeypatch.setattr(llamacpp_build, "_cmake_build", fake_build)
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(
        ensure_llama_server("9.9.9", cache_dir=tmp_path, progress=say))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(builds) == 1
    assert results == [tmp_path / "llama-server-9.9.9" / "llama-server"] * 2
    assert sum(m.startswith("waiting for another process") for m in heard) == 1
    assert (tmp_path / "llama-server-9.9.9" / "build.log").read_text() == "ok\n"
    assert not list(tmp_path.glob("llama-build-*"))  # the work folder is removed


@pytest.mark.parametrize(("line", "pct"), [
    ("[12/150] Building CXX object common/CMakeFiles/common.dir/arg.cpp.o", 8),
    ("[150/150] Linking CXX executable bin/llama-server", 100),
    ("[ 45%] Building C object ggml/src/CMakeFiles/ggml-base.dir/ggml.c.o", 45),
    ("-- Configuring done", None),
])
def test_build_progress_is_read_from_ninja_or_make_lines(line, pct):
    assert llamacpp_build.build_percent(line) == pct


def test_the_sdist_is_fetched_alone_from_source(monkeypatch, tmp_path):
    """`--no-binary llama-cpp-python`, not `:all:` (which builds the build backends from source too)."""
    seen: list[list[str]] = []

    def fake_run(cmd, **_kw):
        seen.append(cmd)
        dest = Path(cmd[cmd.index("-d") + 1])
        (dest / "llama_cpp_python-9.9.9.tar.gz").write_bytes(b"sdist")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(llamacpp_build.subprocess, "run", fake_run)
    heard: list[str] = []
    path = llamacpp_build.fetch_sdist("9.9.9", tmp_path, heard.append)
    assert path.read_bytes() == b"sdist" and heard and "downloading" in heard[0]
    [cmd] = seen
    assert cmd[cmd.index("--no-binary") + 1] == "llama-cpp-python" and ":all:" not in cmd


@pytest.mark.real_engine
def test_context_manager_stops_on_exit(llama_server_binary, tiny_model, tmp_path):
    with LlamaServer(tiny_model.gguf, binary=llama_server_binary, log_path=tmp_path / "l.log") as srv:
        assert srv.running
    assert not srv.running
