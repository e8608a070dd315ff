"""The OpenAI Batch API on the gateway (127.0.0.1, simulated engines), through the official
`openai` client: upload, create, retrieve, list, cancel, the output and error files;
malformed lines in the error file with their line numbers; each refusal naming its field;
one tenant never sees another's files or batches."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import orjson
import pytest
from live_support import MODEL, poll_until

from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import ServeConfig, serve_config

KEY, OTHER = "sk-batch-a", "sk-batch-b"


def batch_config(folder: Path, time_scale: float = 200.0, **batches: object) -> ServeConfig:
    return serve_config({
        "instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}],
        "api_keys": {KEY: {"tenant": "acme"}, OTHER: {"tenant": "globex"}},
        "gateway": {"time_scale": time_scale, "queue": "flowserve", "dispatch": "flowserve",
                    "batches": {"dir": str(folder), "max_lines": 50, "max_file_bytes": 64 << 10,
                                "max_open_batches": 3, **batches}},
    }, "test")


def line(i: int, url: str = "/v1/chat/completions", **body: object) -> bytes:
    req = {"model": MODEL, "messages": [{"role": "user", "content": f"question {i}: how far is the moon?"}],
           "max_tokens": 4, **body}
    return orjson.dumps({"custom_id": f"req-{i}", "method": "POST", "url": url, "body": req})


def jsonl(*lines: bytes) -> bytes:
    return b"\n".join(lines) + b"\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(batch_config(tmp_path_factory.mktemp("batches")))) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server: BackgroundServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0)


def finished(client: openai.OpenAI, batch_id: str) -> openai.types.Batch:
    return poll_until(lambda: (b := client.batches.retrieve(batch_id)).status in ("completed", "cancelled",
                                                                                   "failed", "expired") and b,
                      60, f"batch {batch_id} ended")


def output_lines(client: openai.OpenAI, file_id: str | None) -> list[dict]:
    assert file_id is not None
    return [orjson.loads(x) for x in client.files.content(file_id).content.splitlines()]


def test_a_batch_runs_with_the_official_client(client: openai.OpenAI) -> None:
    up = client.files.create(file=("in.jsonl", io.BytesIO(jsonl(*(line(i) for i in range(6))))), purpose="batch")
    assert up.purpose == "batch" and up.bytes > 0 and up.filename == "in.jsonl"
    batch = client.batches.create(input_file_id=up.id, endpoint="/v1/chat/completions", completion_window="24h",
                                  metadata={"job": "nightly"})
    assert batch.status == "validating" and batch.metadata == {"job": "nightly"}
    done = finished(client, batch.id)
    assert done.status == "completed" and done.error_file_id is None
    assert done.request_counts is not None and (done.request_counts.total, done.request_counts.completed,
                                                done.request_counts.failed) == (6, 6, 0)
    assert done.in_progress_at and done.finalizing_at and done.completed_at and done.expires_at
    out = output_lines(client, done.output_file_id)
    assert [o["custom_id"] for o in out] == [f"req-{i}" for i in range(6)]
    for o in out:
        body = o["response"]["body"]
        assert o["error"] is None and o["response"]["status_code"] == 200
        assert body["object"] == "chat.completion" and body["usage"]["completion_tokens"] == 4
        assert o["response"]["request_id"]
    assert client.files.retrieve(done.output_file_id).purpose == "batch_output"
    assert batch.id in [b.id for b in client.batches.list()]


def test_malformed_lines_go_to_the_error_file_and_the_rest_run(client: openai.OpenAI) -> None:
    data = jsonl(line(0), b"{not json", orjson.dumps({"method": "POST"}), line(3, url="/v1/completions"),
                 b"", line(0), line(5, stream=True), line(6, max_tokens="four"), line(7))
    up = client.files.create(file=("mixed.jsonl", io.BytesIO(data)), purpose="batch")
    done = finished(client, client.batches.create(input_file_id=up.id, endpoint="/v1/chat/completions",
                                                  completion_window="24h").id)
    assert done.status == "completed"
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (8, 2, 6)
    assert [o["custom_id"] for o in output_lines(client, done.output_file_id)] == ["req-0", "req-7"]
    errors = {e["error"]["line"]: e for e in output_lines(client, done.error_file_id)}
    assert sorted(errors) == [2, 3, 4, 6, 7, 8]  # line 5 is blank
    assert errors[2]["custom_id"] is None and "not valid JSON" in errors[2]["error"]["message"]
    assert "custom_id" in errors[3]["error"]["message"]
    assert errors[4]["custom_id"] == "req-3" and "url" in errors[4]["error"]["message"]
    assert errors[6]["custom_id"] == "req-0" and "earlier line" in errors[6]["error"]["message"]
    assert "stream" in errors[7]["error"]["message"]
    # a body the endpoint refuses ran, and its answer is the error file's: the route's own 400
    assert errors[8]["response"]["status_code"] == 400 and "max_tokens" in errors[8]["error"]["message"]


def test_each_refusal_names_its_field(client: openai.OpenAI, server: BackgroundServer) -> None:
    up = client.files.create(file=("in.jsonl", io.BytesIO(jsonl(line(0)))), purpose="batch")
    cases = [({"endpoint": "/v1/embeddings"}, "endpoint"), ({"completion_window": "1h"}, "completion_window"),
             ({"input_file_id": "file-nope"}, "input_file_id")]
    for change, field in cases:
        args = {"input_file_id": up.id, "endpoint": "/v1/chat/completions", "completion_window": "24h", **change}
        with pytest.raises(openai.APIStatusError) as e:
            client.batches.create(**args)
        assert e.value.status_code in (400, 404) and e.value.body["param"] == field, e.value.body
    with pytest.raises(openai.APIStatusError) as e:
        client.files.create(file=("big.jsonl", io.BytesIO(b" " * (65 << 10) + line(0))), purpose="batch")
    assert e.value.status_code == 413 and e.value.body["param"] == "file"
    with pytest.raises(openai.BadRequestError) as e:
        client.files.create(file=("long.jsonl", io.BytesIO(jsonl(*(line(i) for i in range(51))))), purpose="batch")
    assert e.value.body["param"] == "file" and "max_lines" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.files.create(file=("in.jsonl", io.BytesIO(jsonl(line(0)))), purpose="fine-tune")
    assert e.value.body["param"] == "purpose"
    r = httpx.post(f"{server.url}/v1/batches", headers={"authorization": f"Bearer {KEY}"},
                   json={"input_file_id": up.id, "endpoint": "/v1/completions", "completion_window": "24h",
                         "priority": 1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "priority"


def test_a_tenant_sees_only_its_own(client: openai.OpenAI, server: BackgroundServer) -> None:
    other = openai.OpenAI(base_url=f"{server.url}/v1", api_key=OTHER, max_retries=0)
    up = client.files.create(file=("in.jsonl", io.BytesIO(jsonl(line(0)))), purpose="batch")
    batch = client.batches.create(input_file_id=up.id, endpoint="/v1/chat/completions", completion_window="24h")
    for call in (lambda: other.files.retrieve(up.id), lambda: other.files.content(up.id),
                 lambda: other.batches.retrieve(batch.id), lambda: other.batches.cancel(batch.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    with pytest.raises(openai.NotFoundError) as e:
        other.batches.create(input_file_id=up.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert e.value.body["param"] == "input_file_id"
    assert up.id not in [f.id for f in other.files.list()]
    assert batch.id not in [b.id for b in other.batches.list()]
    finished(client, batch.id)


def test_cancel_and_the_open_batch_limit(tmp_path: Path) -> None:
    # two requests out at a time, each answered in about a second
    with BackgroundServer(create_app(batch_config(tmp_path, time_scale=0.05, max_in_flight=2))) as srv:
        client = openai.OpenAI(base_url=f"{srv.url}/v1", api_key=KEY, max_retries=0)
        up = client.files.create(file=("in.jsonl", io.BytesIO(jsonl(*(line(i) for i in range(20))))),
                                 purpose="batch")
        ids = [client.batches.create(input_file_id=up.id, endpoint="/v1/chat/completions",
                                     completion_window="24h").id for _ in range(3)]
        with pytest.raises(openai.RateLimitError) as e:
            client.batches.create(input_file_id=up.id, endpoint="/v1/chat/completions", completion_window="24h")
        assert "max_open_batches" in e.value.body["message"]
        cancelled = client.batches.cancel(ids[0])
        assert cancelled.status == "cancelling" and cancelled.cancelling_at
        end = finished(client, ids[0])
        assert end.status == "cancelled" and end.cancelled_at
        counts = end.request_counts
        assert counts is not None and counts.total == 20 and counts.completed + counts.failed < 20
        assert len(output_lines(client, end.output_file_id)) == counts.completed
        with pytest.raises(openai.ConflictError):
            client.batches.cancel(ids[0])
        client.batches.create(input_file_id=up.id, endpoint="/v1/chat/completions", completion_window="24h")


def test_off_without_a_folder(server: BackgroundServer) -> None:
    from flowserve.host.settings import serve_config as sc

    cfg = sc({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL}]}, "test")
    with BackgroundServer(create_app(cfg)) as srv:
        r = httpx.get(f"{srv.url}/v1/batches")
        assert r.status_code == 404 and "gateway.batches.dir" in r.json()["error"]["message"]
