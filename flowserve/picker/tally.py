"""What the picker learns of an engine's answer from the proxy's response path: the status,
the first byte, the end, and the usage the engine reports — so each call ends in the core
with the tokens it really produced, as when the gateway relays it.

A JSON answer is read whole at its end (`usage`, llama-server's `timings.cache_n`); an
SSE stream is read line by line as it passes, and only its events that carry `usage`,
`timings` or an `error` are decoded (an event per token costs a byte search, not a
parse); without usage, output tokens are the stream's events. Nothing here is trusted:
a body that is not what it claims gives no usage, never an exception.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import orjson

from flowserve.engines.answer import Accumulator, EngineError, error_from_body, retryable_status
from flowserve.engines.backend import CallOutcome

MAX_JSON_BYTES = 8 << 20  # a JSON answer larger than this is not read for usage
_MARKERS = (b'"usage"', b'"timings"', b'"error"')


@dataclass(frozen=True, slots=True)
class Ended:
    """A response's end as the core learns it: an outcome, or the engine's error."""

    outcome: CallOutcome | None
    error: EngineError | None


class ResponseTally:
    def __init__(self, status: int, stream: bool, started: float, headers_at: float) -> None:
        self.status = status
        self.stream = stream
        self.started = started
        self.first_byte: float | None = headers_at if not stream else None
        self._acc = Accumulator(started)
        self._buf = bytearray()
        self._events = 0
        self._too_big = False

    def feed(self, data: bytes, now: float) -> None:
        if not data:
            return
        if not self.stream or self.status >= 400:
            if len(self._buf) + len(data) > MAX_JSON_BYTES:
                self._too_big = True
                self._buf.clear()
            elif not self._too_big:
                self._buf += data
            return
        if self.first_byte is None:
            self.first_byte = now
        self._buf += data
        end = self._buf.rfind(b"\n")
        if end < 0:
            return
        lines = bytes(self._buf[:end]).split(b"\n")
        del self._buf[:end + 1]
        for line in lines:
            if line.startswith(b"data:"):
                self._event(line[5:].strip())

    def _event(self, payload: bytes) -> None:
        if payload == b"[DONE]":
            return
        self._events += 1
        if any(m in payload for m in _MARKERS):
            self._add(payload)

    def _add(self, payload: bytes) -> None:
        try:
            data = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return
        if isinstance(data, dict):
            # an in-band error event, or fields of the wrong shape: no usage from it
            with contextlib.suppress(EngineError, AttributeError, TypeError):
                self._acc.add(data, None)

    def end(self, now: float) -> Ended:
        """The call's end: its outcome, or for an error status the engine's error."""
        if self.status >= 400:
            body: object = {}
            if self._buf and not self._too_big:
                try:
                    body = orjson.loads(bytes(self._buf))
                except orjson.JSONDecodeError:
                    body = {"message": bytes(self._buf[:300]).decode(errors="replace")}
            err = error_from_body(body, self.status)
            return Ended(None, EngineError(str(err), retryable=retryable_status(self.status), status=self.status))
        if self.stream:
            if self._buf.startswith(b"data:"):  # a last event without its newline
                self._event(bytes(self._buf[5:]).strip())
        elif self._buf and not self._too_big:
            self._add(bytes(self._buf))
        self._buf.clear()
        try:
            r = self._acc.result(now)
            output = r.output_tokens if self._acc.usage is not None or not self.stream else self._events
            output, cached, prompt = int(output), int(r.cached_tokens or 0), int(r.prompt_tokens or 0)
            finish = str(r.finish_reason or "stop")
        except (ValueError, TypeError, OverflowError):  # usage of the wrong shape: counted events only
            output, cached, prompt, finish = self._events, 0, 0, "stop"
        return Ended(CallOutcome(max(output, 0), max(cached, 0), max(prompt, 0), "", finish, self.started,
                                 self.first_byte), None)
