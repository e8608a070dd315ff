"""The HTTP gateway (FastAPI): OpenAI-compatible endpoints and workflow queries, routed
through the live driver (so through the configured dispatch and queue policies).

Endpoints: POST /v1/completions, /v1/chat/completions (SSE with `stream: true`),
GET /v1/models, POST /v1/workflows/{name} (synchronous, or `"async": true` → 202 and
GET /v1/queries/{id}), GET /v1/workflows, GET/DELETE /v1/programs/{id}, GET /health, GET /metrics
(Prometheus), GET /status (the live status page) and /status.json (its data; admin keys),
admin: GET/POST /admin/instances, DELETE /admin/instances/{name}.
Headers: `x-tenant` (the API key's tenant, or one it acts for: `flowserve.tenants`), `x-priority`,
`x-slo-ms`, `x-flowserve-class`, and a program's
`x-flowserve-program`, `x-flowserve-stage`, `x-flowserve-thread` (docs/serving.md).
Errors have OpenAI's body `{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException

from flowserve.apps.base import WorkflowDef
from flowserve.errors import FailureKind, FlowserveError, RequestError
from flowserve.gateway.asgi import GatewayASGI
from flowserve.gateway.disconnect import ClientWatch
from flowserve.gateway.llm import LLMRoutes
from flowserve.gateway.status import StatusBoard, status_page
from flowserve.graph.program import PROGRAM_WORKFLOW
from flowserve.host.backends import BackendFactory
from flowserve.host.intake.offload import LARGE_BODY_BYTES, off_loop
from flowserve.host.intake.openai_api import (
    APIError,
    decode_json,
    failure_error,
)
from flowserve.host.intake.tenancy import authenticate, read_headers, request_tenant
from flowserve.host.query import QueryResult, QueryStatus, query_body
from flowserve.host.root import LiveHost
from flowserve.host.served import app_ref
from flowserve.host.settings import ServeConfig
from flowserve.host.shared_instances import instance_spec
from flowserve.tenants import api_keys


class Gateway:
    """The HTTP face of a live host (`flowserve.host.root.LiveHost`): what FastAPI's routes
    call beyond the host — workflows over HTTP, queries' state, the admin endpoints."""

    def __init__(self, config: ServeConfig, backend_factory: BackendFactory | None = None,
                 workflows: Mapping[str, WorkflowDef] | None = None) -> None:
        self.host = LiveHost(config, backend_factory, workflows)
        self.config = config
        self.driver = self.host.driver
        self.programs = self.host.programs
        self.workflows = self.host.workflows
        self.prepared = self.host.prepared
        self.replica = self.host.replica
        self.driver_loop: asyncio.AbstractEventLoop | None = None
        self._admin_keys = api_keys(list(config.admin_keys))

    async def start(self) -> None:
        self.driver_loop = asyncio.get_running_loop()
        await self.host.start()

    async def stop(self) -> None:
        await self.host.stop()

    # ------------------------------------------------------------------ helpers

    def authenticate(self, request: Request) -> None:
        authenticate(request.headers.get("authorization", ""), self.config.keys)

    def tenant(self, request: Request) -> str:
        """The request's authenticated tenant (`tenancy.request_tenant`)."""
        return request_tenant(request.headers, self.config.keys)

    def check_admin(self, request: Request) -> None:
        """An admin endpoint's key check: the admin keys, else open only where no key guards anything."""
        if self.config.admin_closed:
            raise APIError(403, "the admin endpoints need an admin key: the api_keys name tenants, and "
                                "gateway.admin_keys names none", code="admin_keys_not_configured")
        authenticate(request.headers.get("authorization", ""), self._admin_keys)


    # ------------------------------------------------------------------ workflows

    async def workflow_request(self, request: Request, name: str) -> Response:
        hdr = read_headers(request.headers, self.config.keys)
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
        model = self.host.model_of(model) if model else None
        try:  # bad inputs answer 400 here, before the query exists; the core builds its own
            wf.build(inputs, self.prepared[name], model)
        except RequestError as e:
            raise APIError(400, str(e), param="input") from None
        except Exception as e:  # the workflow's own constructor failed: its error, not a dropped connection
            raise APIError(500, f"workflow {name!r} could not be built: {type(e).__name__}: {e}", "server_error",
                           "app_error") from None
        h = self.driver.new_query(name, app_ref(name, inputs, model), model, hdr.tenant, hdr.priority, hdr.slo_s,
                                  cls=hdr.cls)
        await self.host.submit(h)
        if body.get("async"):
            return JSONResponse({"id": h.ref, "workflow": name, "status": "running",
                                 "url": f"/v1/queries/{h.ref}"}, status_code=202)
        watch = ClientWatch(request.receive, self.driver.cancel)
        watch.track(h.id)
        try:
            result = await h.done
        finally:
            watch.stop()
        return query_answer(h.ref, result)

    async def query_status(self, query_id: str, tenant: str) -> Response:
        """A query of the tenant's by its id; another tenant's is not found (404, as an
        unknown one: its existence is not revealed), and so is a program's (see
        /v1/programs/ID). With replicas, another replica's finished query is found too."""
        h = self.driver.book.by_ref(query_id)
        if h is None and self.replica is not None:
            found = await self.replica.query(query_id, tenant)
            if found is not None:
                return JSONResponse(found)
        if h is None or h.tenant != tenant or h.workflow == PROGRAM_WORKFLOW:
            raise APIError(404, f"no query {query_id!r} (unknown, or finished long ago)", code="query_not_found")
        if not h.done.done():
            return JSONResponse({"id": h.ref, "workflow": h.workflow, "status": "running",
                                 "calls_finished": h.calls_finished})
        return query_answer(h.ref, h.done.result())

    # ------------------------------------------------------------------ admin

    async def add_instance(self, request: Request) -> Response:
        """With replicas, the change goes to the state first: every replica applies it."""
        body = decode_json(await request.body())
        try:
            spec = instance_spec(body)
        except FlowserveError as e:
            raise APIError(400, str(e)) from None
        if self.replica is not None:
            await self.replica.instances.share_add(body, spec)
        up = await self.driver.add_instance(spec)
        return JSONResponse({"added": spec.name, "up": up, "instances": self.driver.instances()}, status_code=201)

    async def remove_instance(self, name: str) -> Response:
        if name not in {row["name"] for row in self.driver.instances()}:
            raise APIError(404, f"no instance {name!r}", code="instance_not_found")
        if self.replica is not None:
            await self.replica.instances.share_remove(name)
        try:
            await self.driver.remove_instance(name)
        except KeyError:
            raise APIError(404, f"no instance {name!r}", code="instance_not_found") from None
        return JSONResponse({"removed": name, "instances": self.driver.instances()})


def error_response(e: APIError) -> JSONResponse:
    return JSONResponse(e.body(), status_code=e.status, headers=e.headers)


def query_answer(ref: str, r: QueryResult) -> Response:
    """A finished query's answer: its body, with the error of a failed one (an output
    that is not JSON is its workflow's error, not a response that cannot be written)."""
    out = query_body(ref, r)
    err = None if r.completed else failure_error(r.kind, r.reason)
    try:
        json.dumps(out["output"], allow_nan=False)  # as JSONResponse renders it
    except (TypeError, ValueError) as e:
        err = failure_error(FailureKind.APP_ERROR,
                            f"workflow {r.workflow!r}: output() returned a value that is not JSON ({e})")
        out = {**out, "status": QueryStatus.FAILED, "reason": err.message, "output": None}
    if err is not None:
        return JSONResponse({**err.body(), **out}, status_code=err.status)
    return JSONResponse(out)


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

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> Response:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = "not_found" if exc.status_code == 404 else None
        return error_response(APIError(exc.status_code, str(exc.detail), code=code))

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:
        # starlette re-raises after this answer and uvicorn then drops the connection: say so
        return error_response(APIError(500, f"internal error: {type(exc).__name__}", "server_error",
                                       "internal_error", headers={"connection": "close"}))

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        gw.authenticate(request)
        return JSONResponse({"object": "list", "data": [
            {"id": m, "object": "model", "created": 0, "owned_by": "flowserve"} for m in gw.driver.models()]})

    @app.get("/v1/workflows")
    async def workflows_list(request: Request) -> Response:
        gw.authenticate(request)
        return JSONResponse({"data": [{"name": w.name, "description": w.description}
                                      for w in gw.workflows.values()]})

    @app.post("/v1/workflows/{name}")
    async def run_workflow(name: str, request: Request) -> Response:
        return await gw.workflow_request(request, name)

    @app.get("/v1/queries/{query_id}")
    async def get_query(query_id: str, request: Request) -> Response:
        return await gw.query_status(query_id, gw.tenant(request))

    @app.get("/v1/programs/{program_id}")
    async def get_program(program_id: str, request: Request) -> Response:
        return JSONResponse(await gw.programs.state(program_id, gw.tenant(request)))

    @app.delete("/v1/programs/{program_id}")
    async def delete_program(program_id: str, request: Request) -> Response:
        return JSONResponse(await gw.programs.delete(program_id, gw.tenant(request)))

    @app.get("/health")
    async def health() -> Response:
        d = gw.driver
        rows = d.instances()
        up = sum(1 for i in rows if i["up"])
        status = "draining" if d.draining else "ok" if up else "unavailable"
        views = {kind: [i["name"] for i in rows if i["prefix_view"] == kind] for kind in ("precise", "estimated")}
        views["topped_up_from_slots"] = [i["name"] for i in rows if "prefix_view_slots" in i]
        body = {"status": status, "instances_up": up, "open_queries": d.open_queries, "prefix_views": views}
        if gw.replica is not None:  # degraded without Redis still serves: the detail says so
            body["state"] = gw.replica.health()
        return JSONResponse(body, status_code=200 if status == "ok" else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(gw.driver.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    board, page = StatusBoard(gw.driver, gw.programs), status_page()

    @app.get("/status")
    async def status_html() -> Response:
        return HTMLResponse(page)

    @app.get("/status.json")
    async def status_json(request: Request) -> Response:
        gw.check_admin(request)
        return JSONResponse(board.snapshot())

    @app.get("/admin/instances")
    async def list_instances(request: Request) -> Response:
        gw.check_admin(request)
        return JSONResponse({"instances": gw.driver.instances()})

    @app.post("/admin/instances")
    async def add_instance(request: Request) -> Response:
        gw.check_admin(request)
        return await gw.add_instance(request)

    @app.delete("/admin/instances/{name}")
    async def remove_instance(name: str, request: Request) -> Response:
        gw.check_admin(request)
        return await gw.remove_instance(name)

    return GatewayASGI(app, LLMRoutes(gw.host), gw)
