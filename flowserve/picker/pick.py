"""The picker's engine backend: where the gateway would send a call to its engine, the
endpoint picker hands the engine's address to the proxy instead, and the call ends when
the proxy reports the engine's response.

A request held by the picker carries a `Pick` as its call's sink. The live driver runs
the call as it runs every call: when the core sends it (`SendCall`), the call runner asks
the instance's `PickerBackend` to begin it, which resolves the pick with the instance and
returns the awaitable the response path completes (`Pick.finish`, `Pick.fail`). From the
pick on, the request is the proxy's: the sink is `committed`, so a failure is reported as
final (never retried, never re-dispatched by the core: the proxy already forwarded the
request, and its own retry takes the fallbacks the picker named). A call the proxy's retry
answered from another engine finishes with `failed_over` set, so the picked instance's
circuit counts the failure. Probes and tokenization stay those of the engine's own backend.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from flowserve.engines.backend import CallOutcome, EngineError, EngineRequest, TokenSink
from flowserve.engines.openai_backend import EngineTokens, OpenAIBackend
from flowserve.errors import ConfigError
from flowserve.host.settings import GatewaySettings
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall


def endpoint_of(url: str) -> str:
    """An engine's `host:port` as the proxy's override_host policy needs it: an IP address
    (a host name is resolved once, here), IPv6 in brackets."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as e:  # a malformed IPv6 address or port
        raise ConfigError(f"{url!r}: not an engine URL ({e})") from None
    if not host:
        raise ConfigError(f"{url!r}: no host")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        try:
            ip = ipaddress.ip_address(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][4][0])
        except (OSError, IndexError, UnicodeError) as e:
            raise ConfigError(f"{url!r}: cannot resolve {host!r} ({e})") from None
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def _drop(_text: object) -> None:
    """The proxy relays the answer: the picker never sees text to forward."""


class Pick(TokenSink):
    """One request held by the picker: `chosen` resolves with (instance, endpoint) when the
    core sends its call — or with None when its query ended without sending it (`unsent`) —
    and `outcome` is what the response path reports."""

    committed_how = "after the proxy took the request"

    def __init__(self) -> None:
        super().__init__(_drop)
        loop = asyncio.get_running_loop()
        self.chosen: asyncio.Future[tuple[str, str] | None] = loop.create_future()
        self.outcome: asyncio.Future[CallOutcome] | None = None
        self.call: LLMCall | None = None
        self.abandoned = False

    def route(self, call: LLMCall, instance: str, endpoint: str) -> asyncio.Future[CallOutcome]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[CallOutcome] = loop.create_future()
        if self.abandoned:  # its stream closed before the core sent it: nobody would report its end
            fut.set_exception(EngineError("the request left the proxy before it was picked", retryable=False))
            return fut
        if self.chosen.done():  # sent again after its first engine failed: the proxy already forwarded it
            fut.set_exception(EngineError(f"call {call.id} was already handed to the proxy", retryable=False))
            return fut
        self.committed = True  # from here the request is the proxy's: failures are final
        self.call = call
        self.outcome = fut
        self.chosen.set_result((instance, endpoint))
        return fut

    def abandon(self) -> None:
        """Its stream closed before the core sent its call: nobody would report its end."""
        self.abandoned = True

    def unsent(self, _done: object = None) -> None:
        """Its query ended (a done-callback of the query's future): if no call went out, none will."""
        if not self.chosen.done():
            self.chosen.set_result(None)

    def finish(self, outcome: CallOutcome) -> None:
        if self.outcome is not None and not self.outcome.done():
            self.outcome.set_result(outcome)

    def fail(self, error: EngineError) -> None:
        if self.outcome is not None and not self.outcome.done():
            self.outcome.set_exception(error)


class PickerBackend:
    """An instance behind the proxy: begins a call by handing its endpoint to the call's
    `Pick`; probes and tokenizes through the engine's OpenAI backend."""

    def __init__(self, spec: InstanceSpec, settings: GatewaySettings) -> None:
        assert spec.url, f"instance {spec.name} has no url"
        self.spec = spec
        self.endpoint = endpoint_of(spec.url)
        self._engine = OpenAIBackend(spec, settings)
        self.tokenizer: EngineTokens = self._engine.tokenizer

    def begin(self, call: LLMCall, req: EngineRequest) -> asyncio.Future[CallOutcome]:
        if isinstance(req.sink, Pick):
            return req.sink.route(call, self.spec.name, self.endpoint)
        fut: asyncio.Future[CallOutcome] = asyncio.get_running_loop().create_future()
        fut.set_exception(EngineError("the endpoint picker serves OpenAI requests only, not workflow calls",
                                      retryable=False))
        return fut

    async def probe(self) -> bool:
        return await self._engine.probe()

    async def aclose(self) -> None:
        await self._engine.aclose()
