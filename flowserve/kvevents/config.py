"""An instance's `kv_events:` entry: where its engine publishes its KV-cache events."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator

from flowserve.limits import BlockSize
from flowserve.schema import Strict, at_most
from flowserve.types.kv import KVEventsSpec

_TCP = re.compile(r"tcp://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+|\*):(?P<port>[0-9]{1,5})")


def zmq_endpoint(value: str, what: str) -> str:
    """A ZMQ endpoint a subscriber connects to: tcp://host:port or ipc://path (ValueError saying what is wrong)."""
    if value.startswith("ipc://") and len(value) > 6:
        return value
    m = _TCP.fullmatch(value)
    if m is None:
        raise ValueError(f"{what} {value!r}: write tcp://HOST:PORT (or ipc://PATH)")
    if m["host"] == "*" or m["host"] == "0.0.0.0":
        raise ValueError(f"{what} {value!r}: that is where the engine binds; write the engine's address, "
                         f"e.g. tcp://127.0.0.1:{m['port']}")
    if not 0 < int(m["port"]) < 65536:
        raise ValueError(f"{what} {value!r}: port {m['port']} is not a TCP port")
    return value


class KVEventsConfig(Strict):
    """Where an instance's engine publishes its KV-cache events: vLLM's or SGLang's
    `--kv-events-config '{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:5557",
    "replay_endpoint": "tcp://*:5558"}'`. A simulated instance publishes them itself
    (`kv_events: {}`); an `openai` one needs `endpoint`."""

    endpoint: str | None = Field(None, description="the engine's PUB socket, tcp://HOST:PORT (rank r of "
                                 "data_parallel_size publishes on PORT + r, as vLLM does)")
    replay: str | None = Field(None, description="the engine's replay (ROUTER) socket, tcp://HOST:PORT; without it "
                               "a missed batch cannot be asked for again and the view falls back to the estimate")
    topic: str = Field("", max_length=256, description="the topic the engine publishes on (a subscription prefix)")
    block_size: BlockSize | None = Field(None, description="tokens per KV block, the engine's (default: the "
                                         "instance's `block_size`)")
    data_parallel_size: Annotated[int, Field(ge=1), at_most(256, "one publisher per rank")] = Field(
        1, description="the engine's data-parallel ranks, each with its own cache and publisher")

    @field_validator("endpoint", "replay")
    @classmethod
    def _endpoint(cls, v: str | None, info: ValidationInfo) -> str | None:
        return None if v is None else zmq_endpoint(v, str(info.field_name))

    def spec(self, block_size: int) -> KVEventsSpec:
        return KVEventsSpec(self.endpoint or "", self.replay, self.topic, self.block_size or block_size,
                            self.data_parallel_size)
