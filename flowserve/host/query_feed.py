"""Events about an open query from outside the driver's loop — a program's next call, its
close, one of its calls cancelled — fed to the core in the loop, at the loop's time."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from flowserve.host.query import QueryHandle
from flowserve.types.events import Event


class QueryFeed:
    def __init__(self, control: Callable[[Callable[[float], Any]], Awaitable[Any]],
                 feed: Callable[[Event], None], open_queries: Mapping[int, QueryHandle]) -> None:
        """control: run a function in the driver's loop; feed: hand the core an event there."""
        self._control = control
        self._feed = feed
        self._open = open_queries

    async def deliver(self, query_id: int, event: Callable[[float], Event]) -> bool:
        """Feed `event(now)` if the query is still open; False, and nothing fed, when it ended."""
        def apply(now: float) -> bool:
            if query_id in self._open:
                self._feed(event(now))
                return True
            return False
        return bool(await self._control(apply))
