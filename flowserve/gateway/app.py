"""The HTTP gateway (FastAPI): OpenAI-compatible endpoints and workflow queries, routed
through the live driver (so through the configured dispatch and queue policies).

Endpoints: POST /v1/completions, /v1/chat/completions (SSE with `stream: true`),
GET /v1/models, POST /v1/workflows/{name} (synchronous, or `"async": true` → 202 and
GET /v1/queries/{id}), GET /v1/workflows, GET/DELETE /v1/programs/{id}, GET /health, GET /metrics
(Prometheus), GET /status (the live status page) and /status.json (its data; admin keys),
admin: GET/POST /admin/instances, DELETE /admin/instances/{name}.
Headers: `x-tenant` (else the API key's), `x-priority`, `x-slo-ms`, `x-flowserve-class`, and a program's
`x-flowserve-program`, `x-flowserve-stage`, `x-flowserve-thread` (docs/serving.md).
Errors have OpenAI's body `{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hmac
import shutil
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException

from flowserve.apps.base import WorkflowDef
from flowserve.apps.registry import builtin_workflows
from flowserve.apps.user import user_workflow
from flowserve.config import InstanceConfig
from flowserve.errors import ConfigError, FlowserveError, RequestError
from flowserve.gateway.asgi import GatewayASGI
from flowserve.gateway.disconnect import ClientWatch
from flowserve.gateway.driver import BackendFactory, LiveDriver
from flowserve.gateway.llm import LLMRoutes
from flowserve.gateway.offload import LARGE_BODY_BYTES, off_loop
from flowserve.gateway.openai_api import (
    APIError,
    decode_json,
    failure_error,
)
from flowserve.gateway.programs import ProgramBook
from flowserve.gateway.query import QueryHandle, QueryResult, Rejected
from flowserve.gateway.settings import ServeConfig
from flowserve.gateway.status import StatusBoard, status_page
from flowserve.gateway.tenancy import read_headers
from flowserve.schema import validate

_END = object()


class Gateway:
    def __init__(self, config: ServeConfig, backend_factory: BackendFactory | None = None,
                 workflows: Mapping[str, WorkflowDef] | None = None) -> None:
        self.config = config
        self.driver = LiveDriver(config.instances, config.gateway, backend_factory)
        self.workflows = dict(workflows if workflows is not None else builtin_workflows())
        for name, settings in config.gateway.workflows.items():
            if "app" in settings:  # a user's own Workflow class
                if name in self.workflows:
                    raise ConfigError(f"gateway.workflows.{name}: {name!r} is a built-in workflow; serve your "
                                      f"app under another name")
                self.workflows[name] = user_workflow(name, settings)
        # workflows prepare now (databases, schemas), so bad settings fail before serving
        self.prepared: dict[str, Mapping[str, Any]] = {
            name: wf.prepare(config.gateway.workflows.get(name, {})) if wf.prepare
            else config.gateway.workflows.get(name, {})
            for name, wf in self.workflows.items()}
        for name, wf in self.workflows.items():
            if wf.tools is not None:
                self.driver.tools.register(wf.tools(self.prepared[name]))
        unknown = sorted(set(config.gateway.workflows) - set(self.workflows))
        if unknown:
            raise ConfigError(f"gateway.workflows: no workflow {unknown}; registered: {sorted(self.workflows)}")
        self.driver_loop: asyncio.AbstractEventLoop | None = None
        self.programs = ProgramBook(self.driver, config.gateway.programs, self.driver.clock)

    async def start(self) -> None:
        self.driver_loop = asyncio.get_running_loop()
        await self.driver.start()
        self.programs.start()
        if any(s.kv_events is not None for s in self.config.instances):
            # what start-up built lives as long as the gateway: out of the collector's full passes, which
            # otherwise stall the event loop for 100s of ms under a flood of engine cache events
            gc.collect()
            gc.freeze()

    async def stop(self) -> None:
        await self.programs.stop()
        await self.driver.shutdown()
        for prepared in self.prepared.values():
            for path in prepared.get("_cleanup", ()):
                shutil.rmtree(path, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def check_key(self, request: Request, keys: Sequence[str]) -> None:
        self.check_key_header(request.headers.get("authorization", ""), keys)

    def check_key_header(self, auth: str, keys: Sequence[str]) -> None:
        if not keys:
            return
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise APIError(401, "missing API key: send 'Authorization: Bearer <key>'", code="invalid_api_key")
        token = token.strip()
        if not any(hmac.compare_digest(token.encode(), k.encode()) for k in keys):
            raise APIError(401, "incorrect API key provided", code="invalid_api_key")

    def model_of(self, name: str) -> str:
        if not self.driver.serves(name):
            raise APIError(404, f"the model {name!r} does not exist; served: {', '.join(self.driver.models())}",
                           code="model_not_found", param="model")
        return name

    async def submit(self, h: QueryHandle) -> None:
        try:
            await self.driver.submit(h)
        except Rejected as e:
            headers = {"Retry-After": str(int(e.retry_after))} if e.retry_after else {}
            code = "rate_limit_exceeded" if e.status == 429 else "service_unavailable"
            raise APIError(e.status, e.reason, "server_error" if e.status >= 500 else "rate_limit_error",
                           code, headers=headers) from None

    def check_context(self, model: str, prompt_tokens: int, max_tokens: int) -> None:
        limit = self.driver.max_context(model)
        if limit is not None and prompt_tokens + max_tokens > limit:
            raise APIError(400, f"this model's maximum context length is {limit} tokens, but "
                                f"{prompt_tokens + max_tokens} were requested ({prompt_tokens} in the prompt, "
                                f"{max_tokens} for the completion)", code="context_length_exceeded",
                           param="prompt")

    # ------------------------------------------------------------------ workflows

    async def workflow_request(self, request: Request, name: str) -> Response:
        hdr = read_headers(request.headers)
        wf = self.workflows.get(name)
        if wf is None:
            raise APIError(404, f"no workflow {name!r}; registered: {', '.join(sorted(self.workflows))}",
                           code="workflow_not_found")
        raw = await request.body()
        body = await off_loop(len(raw) > LARGE_BODY_BYTES, decode_json, raw) if raw else {}
        if not isinstance(body, dict):
            raise APIError(400, "the request body must be a JSON object")
        inputs = body.get("input", {})
        if not isinstance(inputs, dict):
            raise APIError(400, "input: expected an object", param="input")
        model = body.get("model")
        if model is not None and not isinstance(model, str):
            raise APIError(400, "model: expected a string", param="model")
        if not isinstance(body.get("async", False), bool):
            raise APIError(400, "async: expected true or false", param="async")
        model = self.model_of(model) if model else None
        try:
            program = wf.build(inputs, self.prepared[name], model)
        except RequestError as e:
            raise APIError(400, str(e), param="input") from None
        h = self.driver.new_query(name, program, model, hdr.tenant, hdr.priority, hdr.slo_s, cls=hdr.cls)
        await self.submit(h)
        if body.get("async"):
            return JSONResponse({"id": h.id, "workflow": name, "status": "running",
                                 "url": f"/v1/queries/{h.id}"}, status_code=202)
        watch = ClientWatch(request.receive, self.driver.cancel)
        watch.track(h.id)
        try:
            result = await h.done
        finally:
            watch.stop()
        out = query_body(result)
        if result.status != "completed":
            err = failure_error(result.reason or "failed")
            return JSONResponse({**err.body(), **out}, status_code=err.status)
        return JSONResponse(out)

    def query_status(self, query_id: str) -> Response:
        try:
            h = self.driver.query(int(query_id))
        except ValueError:
            h = None
        if h is None:
            raise APIError(404, f"no query {query_id!r} (unknown, or finished long ago)", code="query_not_found")
        if not h.done.done():
            return JSONResponse({"id": h.id, "workflow": h.workflow, "status": "running",
                                 "calls_finished": h.calls_finished})
        return JSONResponse(query_body(h.done.result()))

    # ------------------------------------------------------------------ admin

    async def add_instance(self, request: Request) -> Response:
        body = decode_json(await request.body())
        if not isinstance(body, dict):
            raise APIError(400, "expected an instance object")
        try:
            cfg = validate(InstanceConfig, body, "instance")
        except FlowserveError as e:
            raise APIError(400, str(e)) from None
        specs = cfg.specs()
        if len(specs) != 1:
            raise APIError(400, "count: add one instance at a time", param="count")
        spec = specs[0]
        if spec.backend == "openai" and not spec.url:
            raise APIError(400, "url: backend openai needs a url", param="url")
        up = await self.driver.add_instance(spec)
        return JSONResponse({"added": spec.name, "up": up, "instances": self.driver.instances()}, status_code=201)

    async def remove_instance(self, name: str) -> Response:
        try:
            await self.driver.remove_instance(name)
        except KeyError:
            raise APIError(404, f"no instance {name!r}", code="instance_not_found") from None
        return JSONResponse({"removed": name, "instances": self.driver.instances()})


def query_body(r: QueryResult) -> dict[str, Any]:
    return {"id": r.id, "workflow": r.workflow, "status": r.status, "reason": r.reason,
            "latency_s": r.latency_s, "deadline_met": r.deadline_met, "output": r.output,
            "calls": [{"node": c.node, "stage": c.stage, "instance": c.instance,
                       "prompt_tokens": c.prompt_tokens, "cached_tokens": c.cached_tokens,
                       "output_tokens": c.output_tokens} for c in r.calls]}


def create_app(config: ServeConfig, backend_factory: BackendFactory | None = None,
               workflows: Mapping[str, WorkflowDef] | None = None) -> GatewayASGI:
    """The gateway's ASGI app: the OpenAI LLM routes raw (`flowserve.gateway.llm`), the
    rest through FastAPI."""
    gw = Gateway(config, backend_factory, workflows)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await gw.start()
        try:
            yield
        finally:
            await gw.stop()

    app = FastAPI(title="flowserve gateway", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.gateway = gw
    api_keys = config.api_keys
    admin_keys = config.admin_keys

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> Response:
        return exc.response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = "not_found" if exc.status_code == 404 else None
        return APIError(exc.status_code, str(exc.detail), code=code).response()

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:
        # starlette re-raises after this answer and uvicorn then drops the connection: say so
        return APIError(500, f"internal error: {type(exc).__name__}", "server_error", "internal_error",
                        headers={"connection": "close"}).response()

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        gw.check_key(request, api_keys)
        return JSONResponse({"object": "list", "data": [
            {"id": m, "object": "model", "created": 0, "owned_by": "flowserve"} for m in gw.driver.models()]})

    @app.get("/v1/workflows")
    async def workflows_list(request: Request) -> Response:
        gw.check_key(request, api_keys)
        return JSONResponse({"data": [{"name": w.name, "description": w.description}
                                      for w in gw.workflows.values()]})

    @app.post("/v1/workflows/{name}")
    async def run_workflow(name: str, request: Request) -> Response:
        gw.check_key(request, api_keys)
        return await gw.workflow_request(request, name)

    @app.get("/v1/queries/{query_id}")
    async def get_query(query_id: str, request: Request) -> Response:
        gw.check_key(request, api_keys)
        return gw.query_status(query_id)

    @app.get("/v1/programs/{program_id}")
    async def get_program(program_id: str, request: Request) -> Response:
        gw.check_key(request, api_keys)
        return JSONResponse(gw.programs.state(program_id, read_headers(request.headers).tenant))

    @app.delete("/v1/programs/{program_id}")
    async def delete_program(program_id: str, request: Request) -> Response:
        gw.check_key(request, api_keys)
        return JSONResponse(await gw.programs.delete(program_id, read_headers(request.headers).tenant))

    @app.get("/health")
    async def health() -> Response:
        d = gw.driver
        rows = d.instances()
        up = sum(1 for i in rows if i["up"])
        status = "draining" if d.draining else "ok" if up else "unavailable"
        views = {kind: [i["name"] for i in rows if i["prefix_view"] == kind] for kind in ("precise", "estimated")}
        return JSONResponse({"status": status, "instances_up": up, "open_queries": d.open_queries,
                             "prefix_views": views}, status_code=200 if status == "ok" else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(gw.driver.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    board, page = StatusBoard(gw.driver, gw.programs), status_page()

    @app.get("/status")
    async def status_html() -> Response:
        return HTMLResponse(page)

    @app.get("/status.json")
    async def status_json(request: Request) -> Response:
        gw.check_key(request, admin_keys)
        return JSONResponse(board.snapshot())

    @app.get("/admin/instances")
    async def list_instances(request: Request) -> Response:
        gw.check_key(request, admin_keys)
        return JSONResponse({"instances": gw.driver.instances()})

    @app.post("/admin/instances")
    async def add_instance(request: Request) -> Response:
        gw.check_key(request, admin_keys)
        return await gw.add_instance(request)

    @app.delete("/admin/instances/{name}")
    async def remove_instance(name: str, request: Request) -> Response:
        gw.check_key(request, admin_keys)
        return await gw.remove_instance(name)

    return GatewayASGI(app, LLMRoutes(gw))
