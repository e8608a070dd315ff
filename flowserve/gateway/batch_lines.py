"""A batch's line sent as the request it holds: through the same OpenAI route an HTTP
client's request takes (`LLMRoutes.handle`), as its batch's tenant, in the batch class,
so it is checked, tokenized, scheduled and answered exactly as it would be alone."""

from __future__ import annotations

import logging

import orjson

from flowserve.batches.runner import LineAnswer
from flowserve.gateway.llm import LLMRoutes, Reply, error_reply
from flowserve.host.intake.intake import ROUTES
from flowserve.host.intake.openai_api import APIError
from flowserve.host.intake.tenancy import Headers

log = logging.getLogger("flowserve.gateway")
OVERLOAD = (429, 503)  # refusals for overload (admission, draining, no instance up): sent again later


class LineSender:
    def __init__(self, routes: LLMRoutes, retry_s: float) -> None:
        self._routes = routes
        self._retry_s = retry_s

    async def __call__(self, tenant: str, endpoint: str, body: bytes) -> LineAnswer:
        try:
            reply = await self._routes.handle({}, body, ROUTES[endpoint], sent_as=Headers(tenant, 0, None, "batch"))
        except APIError as e:
            reply = error_reply(e)
        except Exception:  # a bug answers this line with a 500, as it would answer a client
            log.exception("batch line to %s", endpoint)
            reply = error_reply(APIError(500, "internal error", "server_error", "internal_error"))
        return self.answer(reply)

    def answer(self, reply: Reply) -> LineAnswer:
        headers = dict(reply.headers)
        if reply.status in OVERLOAD:
            retry = headers.get(b"retry-after", b"")
            retry = retry if retry.isdigit() else b""
            return LineAnswer(reply.status, {}, retry_after=float(retry or 0) or self._retry_s)
        rid = headers.get(b"x-flowserve-query-id")
        return LineAnswer(reply.status, orjson.loads(reply.body), rid.decode() if rid else None)
