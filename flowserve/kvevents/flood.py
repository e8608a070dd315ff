"""A publisher that floods: `python -m flowserve.kvevents.flood ENDPOINT RATE SECONDS`.

Binds ENDPOINT (tcp://127.0.0.1:PORT), waits for a subscriber, then publishes RATE events
a second for SECONDS (0: until it is killed, the same events over and over) — one event
per batch (the worst case for a subscriber: a message per event), each a new block or the
removal of the block stored 1,000 events before (churn) — and prints how many it sent.
Pre-encoded payloads, bursts every 10 ms. The gateway's tests and `bench kv-events` run it
in its own process, so the flood competes with the gateway for the machine as a real
engine would, not for its event loop.
"""

from __future__ import annotations

import asyncio
import sys
import time

from flowserve.kvevents.publisher import KVPublisher
from flowserve.kvevents.wire import encode_batch
from flowserve.types.kv import BlockRemoved, BlockStored

TICK_S = 0.01
CHURN = 1000  # a block is removed this many events after it was stored
FOREVER_RING = 100_000  # events sent over and over by a flood without an end


def payloads(n: int, block_size: int = 16) -> list[bytes]:
    out = []
    for i in range(n):
        if i % 2 and i >= CHURN:
            out.append(encode_batch(0.0, [BlockRemoved(0, (i - CHURN,))]))
        else:
            out.append(encode_batch(0.0, [BlockStored(0, (i,), None, tuple(range(i, i + block_size)), block_size)]))
    return out


async def flood(endpoint: str, rate: float, seconds: float) -> int:
    pub = KVPublisher(endpoint)
    try:
        await pub.subscribed(timeout_s=60.0)
        total = int(rate * seconds) + 1 if seconds > 0 else None
        data = payloads(FOREVER_RING if total is None else total)
        sent = 0
        start = time.monotonic()
        while total is None or sent < total:
            due = int((time.monotonic() - start) * rate) + 1
            due = due if total is None else min(total, due)
            while sent < due:
                await pub.send_payload(data[sent % len(data)])
                sent += 1
            await asyncio.sleep(TICK_S)  # pacing to the rate
        return sent
    finally:
        await pub.aclose()


def main() -> None:
    endpoint, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    print(asyncio.run(flood(endpoint, rate, seconds)), flush=True)


if __name__ == "__main__":
    main()
