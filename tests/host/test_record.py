"""`--record` on a full disk (issue 35 items 3 and 4): recording is a side feature, so its
failure is logged once and counted, never the client's error, and never holds up a
DELETE, a workflow's answer, a client's exit or the shutdown."""

from __future__ import annotations

import errno
import json
import logging
from pathlib import Path

import httpx
import pytest
from full_disk import full_disk
from live_support import MODEL

from flowserve.client import program
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.record import LineFile
from flowserve.host.settings import serve_config

KEY = "sk-record-key"
AUTH = {"authorization": f"Bearer {KEY}"}


def errors_counted(srv: BackgroundServer) -> float:
    text = httpx.get(f"{srv.url}/metrics").text
    return float(next(line.split()[-1] for line in text.splitlines()
                      if line.startswith("flowserve_record_errors_total")))


def test_a_full_disk_never_holds_up_an_answer_a_delete_or_the_shutdown(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "flowserve.gateway")
    with full_disk(tmp_path) as disk:
        cfg = serve_config({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL}], "api_keys": [KEY],
                            "gateway": {"time_scale": 200.0, "record": str(disk.folder),
                                        "workflows": {"summarize": {"app": "user_apps:Summarize"}}}}, "test")
        srv = BackgroundServer(create_app(cfg)).start()
        try:
            url = f"{srv.url}/v1/completions"
            body = {"model": MODEL, "prompt": "one two three", "max_tokens": 2}
            disk.fill()
            # item 3: the DELETE answers with the summary, and the program is no longer open
            assert httpx.post(url, json=body, headers={**AUTH, "x-flowserve-program": "p"}).status_code == 200
            gone = httpx.delete(f"{srv.url}/v1/programs/p", headers=AUTH, timeout=60)
            assert gone.status_code == 200 and gone.json()["status"] == "ended" and gone.json()["calls"] == 1
            assert httpx.get(f"{srv.url}/v1/programs/p", headers=AUTH).json()["status"] == "ended"
            assert "flowserve_programs_open 0.0" in httpx.get(f"{srv.url}/metrics").text
            # item 4: a finished workflow answers with its output
            done = httpx.post(f"{srv.url}/v1/workflows/summarize", json={"input": {"document": "a b c"}},
                              headers=AUTH, timeout=60)
            assert done.status_code == 200 and done.json()["status"] == "completed"
            assert done.json()["output"]["summary"]
            # the client's program ends on exit with its summary (it used to wait forever)
            p = program(srv.url, api_key=KEY, program_id="client")
            with p as client:
                client.completions.create(model=MODEL, prompt="x y", max_tokens=1)
            assert p.summary is not None and p.summary["calls"] == 1
            assert errors_counted(srv) == 3
        finally:
            srv.stop(timeout_s=60)  # raises if the gateway did not stop
        failures = [r for r in caplog.records if "recording" in r.getMessage() and r.levelno >= logging.ERROR]
        assert len(failures) == 1, [r.getMessage() for r in failures]  # logged once, not per query
        assert "No space left on device" in failures[0].getMessage()


def test_a_line_that_does_not_fit_leaves_no_part_of_itself(tmp_path: Path) -> None:
    """A write cut short by a full disk is taken back: the file stays whole JSON lines."""
    line = json.dumps({"step": "x" * 300}) + "\n"
    with full_disk(tmp_path) as disk:
        out = LineFile(disk.folder / "t.jsonl")
        assert out.write(line) is None  # the file's first block is allocated now
        disk.fill()
        errors = [out.write(line) for _ in range(40)]  # the rest of that block fills, then no more
        out.close()
        failed = [e for e in errors if e is not None]
        assert failed and all(e.errno == errno.ENOSPC for e in failed)
        kept = (disk.folder / "t.jsonl").read_text()
        assert kept == line * kept.count("\n") and kept.count("\n") == 1 + errors.index(failed[0])
