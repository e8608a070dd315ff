"""CLI edges of issue 27 (items 11, 13, 14, 15): every output path option that gets a
directory, /dev/null or a place nothing can be written exits 2 with one line naming the
option (one shared check, `flowserve.cli.common.check_output`); `serve` refuses a port out
of range, a port in use and an engine url that is not http(s), each in one line."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.cli.common import OUTPUT_CHECKS

runner = CliRunner()
OUTPUT_NAMES = {"--json", "--out", "--cache", "--plot", "--png", "--record-trace"}


def assert_one_line_exit_2(res, *phrases: str) -> str:
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit), res.exception  # no traceback
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    return lines[0]


def commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command under a (typer's own click) group, with its path of names."""
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):
            yield from commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def options(cmd: Any) -> list[Any]:
    return [p for p in cmd.params if p.param_type_name == "option"]


def checked(param: Any) -> bool | None:
    """True/False: a checked folder/file output option; None: not checked."""
    kind = OUTPUT_CHECKS.get(getattr(param.callback, "__wrapped__", param.callback))  # typer wraps it
    return None if kind is None else kind == "folder"


OPTIONS = [(path, max(p.opts, key=len), checked(p)) for path, cmd in commands(typer.main.get_command(app))
           for p in options(cmd) if checked(p) is not None]


def test_every_output_option_of_every_command_is_checked() -> None:
    unchecked = [(path, max(p.opts, key=len)) for path, cmd in commands(typer.main.get_command(app))
                 for p in options(cmd) if set(p.opts) & OUTPUT_NAMES and checked(p) is None]
    assert not unchecked
    assert len(OPTIONS) >= 25


@pytest.mark.parametrize(("path", "option", "folder"), OPTIONS, ids=[" ".join((*p, o)) for p, o, _ in OPTIONS])
def test_an_output_option_given_the_wrong_kind_of_path_exits_2_in_one_line(
        tmp_path: Path, path: tuple[str, ...], option: str, folder: bool) -> None:
    wrong = tmp_path / "a-file.txt" if folder else tmp_path
    wrong.touch() if folder else None
    res = runner.invoke(app, [*path, option, str(wrong)])
    assert_one_line_exit_2(res, option, "not a directory" if folder else "is a directory")


@pytest.mark.parametrize(("bad", "why"), [("/dev/null", "not a regular file"), ("/proc/1/x", "cannot write in"),
                                          ("/proc/1/x/y.json", "cannot write in")])
def test_json_and_cache_refuse_devices_and_places_nothing_can_be_written(tmp_path: Path, bad: str, why: str) -> None:
    res = runner.invoke(app, ["sql", "SELECT 1", "--cache", bad])
    assert_one_line_exit_2(res, "--cache", why)
    res = runner.invoke(app, ["bench", "core", "--calls", "10", "--json", bad])
    assert_one_line_exit_2(res, "--json", why)


def test_a_directory_as_the_sql_cache_exits_2_before_any_work(tmp_path: Path) -> None:
    res = runner.invoke(app, ["sql", "SELECT 1", "--cache", str(tmp_path)])
    assert_one_line_exit_2(res, "--cache", "is a directory")


def test_a_good_output_path_passes_the_check_and_is_written(tmp_path: Path) -> None:
    out = tmp_path / "new" / "folder" / "rows.json"
    res = runner.invoke(app, ["sql", "SELECT 1 AS x", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["rows"] == [[1]]


@pytest.fixture
def serve_yaml(tmp_path: Path) -> Path:
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump({"instances": [{"name": "a", "gpu": "A100-80G", "model": "llama-3.1-8b"}]}))
    return path


@pytest.mark.parametrize("port", ["99999", "0", "-1", "65536"])
def test_serve_refuses_a_port_out_of_range(serve_yaml: Path, port: str) -> None:
    res = runner.invoke(app, ["serve", "--config", str(serve_yaml), "--port", port])
    assert_one_line_exit_2(res, "--port", "1 to 65535")


def test_serve_on_a_port_in_use_says_so_in_one_line(serve_yaml: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = runner.invoke(app, ["serve", "--config", str(serve_yaml), "--port", str(port)])
    assert_one_line_exit_2(res, f"--port {port}", "already in use")


@pytest.mark.parametrize("url", ["file:///etc/passwd", "http://127.0.0.1", "ftp://127.0.0.1:21"])
def test_serve_refuses_an_engine_url_that_is_not_http_with_a_host_and_port(tmp_path: Path, url: str) -> None:
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump({"instances": [{"name": "e", "gpu": "A100-80G", "model": "llama-3.1-8b",
                                                   "backend": "openai", "url": url}]}))
    res = runner.invoke(app, ["serve", "--config", str(path)])
    assert_one_line_exit_2(res, "url", url)
