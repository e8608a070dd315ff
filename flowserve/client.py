"""A Python client for a flowserve gateway: put an existing agent's calls in one program,
and run served workflows.

    from flowserve.client import program

    with program("http://127.0.0.1:8000", slo_ms=30_000) as client:   # an openai.OpenAI
        plan = client.chat.completions.create(model="llama-3.1-8b", messages=[...])
        act = client.with_options(default_headers=stage("act")).chat.completions.create(...)

Every call made through `client` carries `x-flowserve-program` (and `x-slo-ms`: the
program's deadline, counted from its first call), so the gateway schedules them as one
program; on exit the program ends (`DELETE /v1/programs/{id}`) and its summary is on the
context object (`p = program(...)`, `with p as client: ...`, then `p.summary`). `aprogram`
is the same with an `openai.AsyncOpenAI`. Any framework that takes an OpenAI client or a
base URL and headers (LangGraph through `langchain-openai`, the OpenAI Agents SDK) works
the same way: `program_headers()` gives the headers. `run_workflow` runs a served
workflow (`POST /v1/workflows/NAME`) and returns its answer.

Needs the `openai` package (`pip install flowserve[client]`).
"""

from __future__ import annotations

import uuid
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from flowserve.errors import FlowserveError


class GatewayError(FlowserveError):
    """The gateway refused a request or a workflow failed: its status and message."""

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        super().__init__(f"{status}: {message}")
        self.status, self.message, self.body = status, message, body


def stage(name: str, thread: str | None = None) -> dict[str, str]:
    """Headers naming a call's stage (and thread): `client.with_options(default_headers=stage("plan"))`."""
    return {"x-flowserve-stage": name, **({"x-flowserve-thread": thread} if thread else {})}


def program_headers(program_id: str, slo_ms: float | None = None, tenant: str | None = None,
                    priority: int | None = None) -> dict[str, str]:
    """The headers that make calls part of program `program_id`."""
    out = {"x-flowserve-program": program_id}
    if slo_ms is not None:
        out["x-slo-ms"] = f"{slo_ms:g}"
    if tenant is not None:
        out["x-tenant"] = tenant
    if priority is not None:
        out["x-priority"] = str(priority)
    return out


def _root(base_url: str) -> str:
    base = base_url.rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


def _raise_for(r: httpx.Response) -> Any:
    try:
        body = r.json()
    except ValueError:
        body = r.text
    if r.status_code >= 400:
        err = body.get("error") if isinstance(body, dict) else None
        message = err.get("message") if isinstance(err, dict) else str(body)
        raise GatewayError(r.status_code, message or r.reason_phrase, body)
    return body


class _Session:
    def __init__(self, base_url: str, api_key: str | None, program_id: str | None, slo_ms: float | None,
                 tenant: str | None, priority: int | None, timeout_s: float | None,
                 openai_kwargs: dict[str, Any]) -> None:
        self.root = _root(base_url)
        self.api_key = api_key or "flowserve"  # the gateway accepts any key when it has none configured
        self.program_id = program_id or f"prog-{uuid.uuid4().hex}"
        self.headers = program_headers(self.program_id, slo_ms, tenant, priority)
        self.timeout_s = timeout_s
        self.openai_kwargs = openai_kwargs
        self.summary: dict[str, Any] | None = None

    @property
    def url(self) -> str:
        """The program's URL (its id quoted: `job?2` is not program `job`)."""
        return f"{self.root}/v1/programs/{quote(self.program_id, safe='')}"

    def _auth(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}",
                **({"x-tenant": self.headers["x-tenant"]} if "x-tenant" in self.headers else {})}

    def _ended(self, r: httpx.Response, pending: BaseException | None) -> None:
        """The program's summary (404: no call was ever made); an error of the body wins."""
        if r.status_code == 404:
            return
        try:
            self.summary = _raise_for(r)
        except GatewayError:
            if pending is None:
                raise

    def _client_kwargs(self) -> dict[str, Any]:
        kw = dict(self.openai_kwargs)
        kw["default_headers"] = {**kw.get("default_headers", {}), **self.headers}
        return {"base_url": f"{self.root}/v1", "api_key": self.api_key, **kw}


class ProgramSession(_Session):
    """`with program(...) as client:` — see the module docstring."""

    def __enter__(self) -> Any:
        import openai

        self._client = openai.OpenAI(**self._client_kwargs())
        return self._client

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            with httpx.Client(timeout=self.timeout_s) as http:  # DELETE waits for the program's last calls
                r = http.delete(self.url, headers=self._auth())
                if r.status_code == 409:  # it ended already (idle, or failed): its summary
                    r = http.get(self.url, headers=self._auth())
            self._ended(r, exc)
        finally:
            self._client.close()


class AsyncProgramSession(_Session):
    """`async with aprogram(...) as client:` (an `openai.AsyncOpenAI`)."""

    async def __aenter__(self) -> Any:
        import openai

        self._client = openai.AsyncOpenAI(**self._client_kwargs())
        return self._client

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s) as http:
                r = await http.delete(self.url, headers=self._auth())
                if r.status_code == 409:
                    r = await http.get(self.url, headers=self._auth())
            self._ended(r, exc)
        finally:
            await self._client.close()


def program(base_url: str, *, api_key: str | None = None, program_id: str | None = None,
            slo_ms: float | None = None, tenant: str | None = None, priority: int | None = None,
            timeout_s: float | None = 600.0, **openai_kwargs: Any) -> ProgramSession:
    """One program: an `openai.OpenAI` whose calls the gateway schedules together.
    timeout_s: how long the exit waits for the program's end (`DELETE`: its last calls)."""
    return ProgramSession(base_url, api_key, program_id, slo_ms, tenant, priority, timeout_s, openai_kwargs)


def aprogram(base_url: str, *, api_key: str | None = None, program_id: str | None = None,
             slo_ms: float | None = None, tenant: str | None = None, priority: int | None = None,
             timeout_s: float | None = 600.0, **openai_kwargs: Any) -> AsyncProgramSession:
    """`program` with an `openai.AsyncOpenAI`."""
    return AsyncProgramSession(base_url, api_key, program_id, slo_ms, tenant, priority, timeout_s, openai_kwargs)


def _workflow_request(name: str, inputs: dict[str, Any], model: str | None, api_key: str | None,
                      slo_ms: float | None, tenant: str | None) -> tuple[str, dict[str, Any], dict[str, str]]:
    body: dict[str, Any] = {"input": inputs, **({"model": model} if model else {})}
    headers = {"authorization": f"Bearer {api_key or 'flowserve'}"}
    if slo_ms is not None:
        headers["x-slo-ms"] = f"{slo_ms:g}"
    if tenant is not None:
        headers["x-tenant"] = tenant
    return f"/v1/workflows/{quote(name, safe='')}", body, headers


def run_workflow(base_url: str, name: str, inputs: dict[str, Any], *, model: str | None = None,
                 api_key: str | None = None, slo_ms: float | None = None, tenant: str | None = None,
                 timeout_s: float | None = 600.0) -> dict[str, Any]:
    """Run served workflow `name` on `inputs`; its answer (`output`, `calls`, latency)."""
    path, body, headers = _workflow_request(name, inputs, model, api_key, slo_ms, tenant)
    with httpx.Client(base_url=_root(base_url), timeout=timeout_s) as http:
        return _raise_for(http.post(path, json=body, headers=headers))


async def arun_workflow(base_url: str, name: str, inputs: dict[str, Any], *, model: str | None = None,
                        api_key: str | None = None, slo_ms: float | None = None, tenant: str | None = None,
                        timeout_s: float | None = 600.0) -> dict[str, Any]:
    """`run_workflow`, awaited."""
    path, body, headers = _workflow_request(name, inputs, model, api_key, slo_ms, tenant)
    async with httpx.AsyncClient(base_url=_root(base_url), timeout=timeout_s) as http:
        return _raise_for(await http.post(path, json=body, headers=headers))
