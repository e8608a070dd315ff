"""The load client of `flowserve bench gateway`, in its own process so its CPU is not the
router's: `python -m flowserve.loadtest.load_client URL CLIENTS SECONDS STREAM` prints one
JSON line (requests, seconds, latencies in ms, errors, streamed chunks).

wrk is not installed on this machine, so this is a minimal HTTP/1.1 client on uvloop's
raw protocols (an aiohttp client tops out near 2,500 req/s here, below what it must
measure): each of CLIENTS connections sends one prebuilt request after another over
keep-alive for SECONDS (after a short warm-up) and frames the answers itself
(Content-Length, or chunked to its last chunk; SSE events counted as `data: ` lines).
"""

from __future__ import annotations

import asyncio
import sys
import time
from urllib.parse import urlsplit

import orjson
import uvloop

WARMUP_S = 0.5


def body(stream: bool, seq: int) -> bytes:
    # distinct prompts over 8 shared prefixes (as a prefix-aware router sees in practice)
    return orjson.dumps({"model": "llama-3.1-8b", "prompt": f"shared prefix {seq % 8} " * 8 + f"question {seq}",
                         "max_tokens": 64, "stream": stream})


def request(host: str, path: str, payload: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
            f"authorization: Bearer bench\r\ncontent-length: {len(payload)}\r\n\r\n").encode() + payload


class Conn(asyncio.Protocol):
    def __init__(self) -> None:
        self.buf = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._try()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("closed"))

    def _try(self) -> None:
        if self.waiter is None or self.waiter.done():
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buf[:end]).lower()
        status = int(head[9:12])
        start = end + 4
        if b"transfer-encoding: chunked" in head:
            stop = self.buf.find(b"\r\n0\r\n\r\n", start - 2)
            if stop < 0:
                return
            total = stop + 7
        else:
            i = head.find(b"content-length:")
            length = int(head[i + 15:head.find(b"\r\n", i) if head.find(b"\r\n", i) > 0 else None])
            total = start + length
            if len(self.buf) < total:
                return
        payload = bytes(self.buf[start:total])
        del self.buf[:total]
        self.waiter.set_result((status, payload))

    async def ask(self, req: bytes) -> tuple[int, bytes]:
        self.waiter = asyncio.get_running_loop().create_future()
        assert self.transport is not None
        self.transport.write(req)
        self._try()
        return await self.waiter


async def run(url: str, clients: int, seconds: float, stream: bool) -> dict:
    u = urlsplit(url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    lat: list[float] = []
    errors = chunks = 0
    t_start = time.perf_counter() + WARMUP_S
    stop = t_start + seconds
    loop = asyncio.get_running_loop()

    async def one_client(k: int) -> None:
        nonlocal errors, chunks
        _, conn = await loop.create_connection(Conn, host, port)
        reqs = [request(f"{host}:{port}", u.path, body(stream, k + clients * i)) for i in range(64)]
        i = 0
        while (now := time.perf_counter()) < stop:
            i += 1
            try:
                status, payload = await conn.ask(reqs[i % 64])
            except ConnectionError:
                errors += 1
                _, conn = await loop.create_connection(Conn, host, port)
                continue
            end = time.perf_counter()
            if now >= t_start:
                if status == 200:
                    lat.append((end - now) * 1000)
                    chunks += payload.count(b"data: ") - 1 if stream else 0
                else:
                    errors += 1
        assert conn.transport is not None
        conn.transport.close()

    await asyncio.gather(*(one_client(k) for k in range(clients)))
    return {"requests": len(lat), "seconds": seconds, "errors": errors, "chunks": chunks, "latency_ms": lat}


if __name__ == "__main__":
    url, clients, seconds, stream = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1"
    out = uvloop.run(run(url, clients, seconds, stream))
    sys.stdout.write(orjson.dumps(out).decode() + "\n")
