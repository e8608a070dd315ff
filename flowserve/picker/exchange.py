"""One HTTP request as Envoy's ext_proc stream shows it to the endpoint picker: its request
headers and body, then its response headers and body, each answered in turn.

* An OpenAI request (`POST /v1/completions`, `/v1/chat/completions`) becomes the same
  one-call query, or program call, the gateway would start (the host's `RequestIntake`:
  the same checks, tokens and errors); its answer waits until the core sends the call — held in
  the core's queue while every instance is past its gate — and names the instance's
  endpoint. The body may come buffered (one message; the pick rides on the body's answer)
  or full-duplex streamed (chunks; the pick rides on the headers' answer, and the body
  goes back as it came).
* The response path ends the call: its status, first byte, end and usage (`tally`).
  Response headers gain `x-flowserve-instance` and the query's or program's id, as the
  gateway's do. An engine or proxy failure (5xx) becomes the gateway's JSON error.
* What the gateway answers itself, the picker answers through the proxy: `/v1/models`,
  `/v1/programs/{id}` (GET, DELETE), `/health`, and a JSON 404 for anything else.
* A refusal (bad body, unknown model, over the size limit, 429, 503) is an immediate
  response with the gateway's JSON body. A stream that ends early (the client left, the
  proxy gave up) cancels the query, or fails the call it had picked: never a request
  left hanging, and never a clean end without an answer (the proxy would then route
  the request without a pick).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import unquote

import orjson

from flowserve.engines.answer import EngineError
from flowserve.errors import FailureKind
from flowserve.host.driver import LiveDriver
from flowserve.host.intake.intake import ROUTES, SINGLE, RequestIntake, too_large
from flowserve.host.intake.openai_api import APIError, failure_error
from flowserve.host.intake.tenancy import authenticate, request_tenant
from flowserve.host.root import LiveHost
from flowserve.picker import wire
from flowserve.picker.pick import Pick
from flowserve.picker.tally import ResponseTally


class PickerHost(Protocol):
    """What every `ProxyExchange` shares (`flowserve.picker.service.PickerCore`)."""

    host: LiveHost
    driver: LiveDriver
    intake: RequestIntake
    clock: Callable[[], float]
    max_body_bytes: int

    def count(self, outcome: str) -> None: ...
    def routed(self, instance: str, held_s: float) -> None: ...
    def fallbacks(self, instance: str) -> list[tuple[str, str]]: ...
    def health(self) -> tuple[int, dict[str, Any]]: ...

log = logging.getLogger("flowserve.picker")
Responses = list[wire.ProcessingResponse]
_INTERNAL = APIError(500, "internal error", "server_error", "internal_error")


class ProxyExchange:
    def __init__(self, core: PickerHost) -> None:
        self.core = core
        self.headers: dict[str, str] = {}
        self.kind: str | None = None
        self.full_duplex = False
        self.echo_response = False
        self.body: list[bytes] = []
        self.size = 0
        self.pick: Pick | None = None
        self.cancel: Callable[[], None] | None = None
        self.id_header: tuple[str, str] | None = None
        self.picked_at = 0.0
        self.tally: ResponseTally | None = None
        self.ended = False
        self.elsewhere: dict[str, str] = {}  # the fallbacks offered: endpoint → instance
        self.failed_over: str | None = None  # the instance the proxy retried the call on

    # ------------------------------------------------------------------ requests

    async def on(self, msg: wire.ProcessingRequest) -> Responses:
        which = msg.WhichOneof("request")
        if which == "request_headers":
            return await self._request_headers(msg)
        if which == "request_body":
            return await self._request_body(msg.request_body)
        if which == "request_trailers":
            out = await self._body_end() if self.pick is None and self.kind is not None else []
            return [*out, wire.continue_trailers(True)]
        if which == "response_headers":
            return self._response_headers(msg)
        if which == "response_body":
            return self._response_body(msg.response_body)
        if which == "response_trailers":
            self._finish()
            return [wire.continue_trailers(False)]
        raise ValueError(f"unexpected ext_proc message {which!r}")

    async def _request_headers(self, msg: wire.ProcessingRequest) -> Responses:
        cfg = msg.protocol_config
        self.full_duplex = cfg.request_body_mode == wire.FULL_DUPLEX
        self.echo_response = cfg.response_body_mode == wire.FULL_DUPLEX
        twice = wire.repeated(msg.request_headers, SINGLE)
        if twice is not None:
            return [wire.immediate(APIError(400, f"{twice}: sent more than once; send one", param=twice))]
        h = self.headers = wire.headers_of(msg.request_headers)
        path = h.get(":path", "").split("?", 1)[0]
        method = h.get(":method", "")
        kind = ROUTES.get(path)
        if kind is None or method != "POST":
            return [await self._local(method, path)]
        if cfg.request_body_mode not in (wire.BUFFERED, wire.FULL_DUPLEX, wire.NONE):
            return [wire.immediate(APIError(500, "the proxy's ext_proc filter must send the request body BUFFERED "
                                                 "or FULL_DUPLEX_STREAMED to the endpoint picker", "server_error",
                                            "misconfigured_proxy"))]
        limit = self.core.max_body_bytes
        declared = h.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return [wire.immediate(too_large(limit))]
        self.kind = kind
        if msg.request_headers.end_of_stream or cfg.request_body_mode == wire.NONE:
            return await self._body_end()
        return [] if self.full_duplex else [wire.continue_headers(True)]

    async def _request_body(self, body: Any) -> Responses:
        if self.kind is None or self.pick is not None:  # not ours to read (an immediate answer went out)
            return [] if self.full_duplex else [wire.continue_body(True)]
        if body.body:
            self.size += len(body.body)
            if self.size > self.core.max_body_bytes:
                self.kind = None
                return [wire.immediate(too_large(self.core.max_body_bytes))]
            self.body.append(body.body)
        if body.end_of_stream:
            return await self._body_end()
        return [] if self.full_duplex else [wire.continue_body(True)]

    async def _body_end(self) -> Responses:
        """The whole request is here: hand it to the core and answer with its pick."""
        assert self.kind is not None
        raw = b"".join(self.body)
        pick = self.pick = Pick()
        core = self.core
        try:
            started = await core.intake.start(self.headers, raw, self.kind, lambda _stream: pick, self._on_query)
        except APIError as e:
            core.count("refused")
            return [wire.immediate(e)]
        except Exception:
            log.exception("the picker failed on a request")
            core.count("failed")
            return [wire.immediate(_INTERNAL)]
        h = started.handle
        name, value = started.id_header
        self.id_header = (name.decode(), value.decode())
        waited = core.clock()
        if not pick.chosen.done():
            h.done.add_done_callback(pick.unsent)
        chosen = await pick.chosen
        if chosen is None:  # the core failed it before sending it anywhere
            core.count("failed")
            failed = h.done.result()
            return [wire.immediate(failure_error(failed.kind, failed.reason))]
        instance, endpoint = chosen
        self.picked_at = core.clock()
        core.routed(instance, self.picked_at - waited)
        extra = [("x-flowserve-instance", instance)]
        self.elsewhere = {e: name for name, e in core.fallbacks(instance)}
        destination = ",".join([endpoint, *self.elsewhere])  # GIE: the pick, then where a retry goes
        if self.full_duplex:
            return [wire.routed_headers(destination, extra), *wire.streamed_body(True, raw, True)]
        return [wire.routed_body(destination, extra)]

    def _on_query(self, target: int | Callable[[], None]) -> None:
        if callable(target):
            self.cancel = target
        else:
            self.cancel = lambda: self.core.driver.cancel(target, "the client went away")

    # ------------------------------------------------------------------ responses

    def _response_headers(self, msg: wire.ProcessingRequest) -> Responses:
        pick = self.pick
        chosen = pick.chosen.result() if pick is not None and pick.chosen.done() else None
        if chosen is None:
            return [wire.continue_headers(False)]
        instance, endpoint = chosen
        h = wire.headers_of(msg.response_headers)
        status = int(h.get(":status", "0") or 0)
        served = wire.served_endpoint(msg)
        if served is not None and served != endpoint:
            self.core.count("retried")  # the picked engine failed before answering; the proxy went on
            self.failed_over = self.elsewhere.get(served, served)
            log.info("the proxy retried a call of %s on %s (%s)", instance, self.failed_over, served)
        now = self.core.clock()
        stream = h.get("content-type", "").startswith("text/event-stream")
        self.tally = ResponseTally(status, stream, self.picked_at, now)
        if status >= 500 or status == 0:  # the engine failed, or the proxy could not reach it
            reason = f"engine error {status} from instance {instance} ({endpoint})"
            self._end(EngineError(reason, retryable=True, status=status))
            return [wire.immediate(failure_error(FailureKind.ENGINE_ERROR, reason))]
        if msg.response_headers.end_of_stream:
            self._finish()
        extra = [("x-flowserve-instance", self.failed_over or instance)]
        if self.id_header is not None:
            extra.append(self.id_header)
        return [wire.continue_headers(False, extra)]

    def _response_body(self, body: Any) -> Responses:
        if self.tally is not None and not self.ended:
            self.tally.feed(body.body, self.core.clock())
            if body.end_of_stream:
                self._finish()
        if self.echo_response:
            return list(wire.streamed_body(False, body.body, body.end_of_stream))
        return [wire.continue_body(False)]

    def _finish(self) -> None:
        if self.ended or self.tally is None or self.pick is None:
            return
        ended = self.tally.end(self.core.clock())
        self._end(ended.error, ended.outcome)

    def _end(self, error: EngineError | None, outcome: Any = None) -> None:
        self.ended = True
        assert self.pick is not None
        if error is not None:
            self.pick.fail(error)
        elif self.failed_over is not None:  # answered elsewhere: the picked instance's circuit counts a failure
            self.pick.finish(dataclasses.replace(outcome, failed_over=self.failed_over))
        else:
            self.pick.finish(outcome)

    def proxy_left(self) -> None:
        """The proxy closed its side of the stream: a request still waiting for its pick
        will not be forwarded (its client left)."""
        if self.pick is not None and not self.pick.chosen.done():
            self.closed()

    def closed(self) -> None:
        """The stream ended: whatever is still open ends with it."""
        pick = self.pick
        if pick is None or self.ended:
            return
        if not pick.chosen.done():  # still held (or still being started): its client left
            pick.abandon()  # a call the core sends later fails at once
            if self.cancel is not None:
                self.cancel()
            return
        if pick.chosen.result() is None:  # its query ended before a pick
            return
        if self.tally is not None and self.tally.status < 400:  # the proxy needed no more of the body
            self._finish()
            return
        self._end(EngineError("the proxy ended the request before the engine's answer was complete (the client "
                              "left, or the proxy gave up)", retryable=False))

    # ------------------------------------------------------------------ answered here

    async def _local(self, method: str, path: str) -> wire.ProcessingResponse:
        """What the gateway answers itself, answered through the proxy."""
        core, h = self.core, self.headers
        try:
            if path == "/health" and method == "GET":
                status, body = core.health()
                return wire.json_response(status, orjson.dumps(body))
            authenticate(h.get("authorization", ""), core.host.config.keys)
            if path == "/v1/models" and method == "GET":
                data = [{"id": m, "object": "model", "created": 0, "owned_by": "flowserve"}
                        for m in core.driver.models()]
                return wire.json_response(200, orjson.dumps({"object": "list", "data": data}))
            if path.startswith("/v1/programs/") and method in ("GET", "DELETE"):
                pid = unquote(path.removeprefix("/v1/programs/"))  # flowserve.client quotes odd ids
                tenant = request_tenant(h, core.host.config.keys)
                programs = core.host.programs
                state = await (programs.state(pid, tenant) if method == "GET" else programs.delete(pid, tenant))
                return wire.json_response(200, orjson.dumps(state))
            raise APIError(404, f"{method} {path}: not served through the endpoint picker (it routes "
                                f"/v1/completions and /v1/chat/completions)", code="not_found")
        except APIError as e:
            return wire.immediate(e)
