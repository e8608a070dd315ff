"""flowserve.client against a gateway on simulated engines: one program per context,
its summary on exit, async too, and served workflows."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import openai
import pytest
from live_support import MODEL

from flowserve.client import GatewayError, aprogram, arun_workflow, program, run_workflow, stage
from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import serve_config

KEY = "sk-client"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    cfg = serve_config({"instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2}],
                        "api_keys": {KEY: {"tenant": "client", "acts_for": ["team-a"]}},
                        "gateway": {"time_scale": 200.0, "dispatch": "flowserve", "queue": "flowserve",
                                    "workflows": {"brief": {"app": "user_apps:Summarize"}}}}, "test")
    with BackgroundServer(create_app(cfg)) as srv:
        yield srv.url


def test_program_context_puts_every_call_in_one_program_and_ends_it(url: str) -> None:
    p = program(url, api_key=KEY, slo_ms=60_000, tenant="team-a")
    with p as client:
        first = client.completions.create(model=MODEL, prompt="the agent's context " * 30, max_tokens=3)
        planner = client.with_options(default_headers=stage("act", thread="t1"))
        second = planner.chat.completions.create(model=MODEL, max_tokens=2,
                                                 messages=[{"role": "user", "content": "next step?"}])
        assert p.summary is None  # still open
    s = p.summary
    assert s is not None and s["id"] == p.program_id and s["status"] == "ended" and s["ended"] == "deleted"
    assert s["calls"] == 2 and s["output_tokens"] == 5 and s["threads"] == ["main", "t1"]
    assert s["prompt_tokens"] == first.usage.prompt_tokens + second.usage.prompt_tokens
    assert s["slo_ms"] == 60_000 and s["deadline_met"] is True
    late = program(url, api_key=KEY, program_id=p.program_id, tenant="team-a")
    with pytest.raises(openai.ConflictError, match="was deleted"), late as again:  # it ended with the context
        again.completions.create(model=MODEL, prompt="late", max_tokens=1)
    assert late.summary == s  # the ended program's summary, not a second error


def test_async_program_and_workflows(url: str) -> None:
    async def body() -> dict:
        p = aprogram(url, api_key=KEY)
        async with p as client:
            await asyncio.gather(*[client.completions.create(model=MODEL, prompt=f"call {i}", max_tokens=2)
                                   for i in range(3)])
        out = await arun_workflow(url, "brief", {"document": "a report " * 10, "words": 2}, api_key=KEY)
        return {"summary": p.summary, "workflow": out}

    got = asyncio.run(body())
    assert got["summary"]["calls"] == 3 and got["summary"]["output_tokens"] == 6
    assert got["workflow"]["status"] == "completed" and len(got["workflow"]["output"]["summary"].split()) == 4
    sync = run_workflow(url, "brief", {"document": "a memo"}, api_key=KEY, slo_ms=30_000)
    assert sync["status"] == "completed" and sync["deadline_met"] is True
    with pytest.raises(GatewayError) as e:
        run_workflow(url, "brief", {"document": "x", "pages": 2}, api_key=KEY)
    assert e.value.status == 400 and "pages" in e.value.message
    with pytest.raises(GatewayError) as e:
        run_workflow(url, "brief", {"document": "x"}, api_key="wrong")
    assert e.value.status == 401
    p = program(url, api_key=KEY)
    with p:  # no call made: nothing to end, no error
        pass
    assert p.summary is None


def test_a_program_id_is_quoted_in_its_url(url: str) -> None:
    """Item 8: `program_id="job?2"` deleted program `job` on exit."""
    job = program(url, api_key=KEY, program_id="job")
    with job as client:
        client.completions.create(model=MODEL, prompt="the job", max_tokens=1)
        odd = program(url, api_key=KEY, program_id="job?2#x%41")
        with odd as other:
            other.completions.create(model=MODEL, prompt="another job", max_tokens=2)
        assert odd.summary is not None and odd.summary["id"] == "job?2#x%41" and odd.summary["calls"] == 1
        assert job.summary is None
        client.completions.create(model=MODEL, prompt="the job goes on", max_tokens=1)  # still open
    assert job.summary is not None and job.summary["calls"] == 2
