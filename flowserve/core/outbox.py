"""The commands a book of the core made while it handled one event."""

from __future__ import annotations

from collections.abc import Iterable

from flowserve.types.commands import Command


class Outbox:
    """A book's outgoing commands: appended while it works, taken as one list by the public
    method that answers the event. One list for the book's life: a caller still extending
    it while a nested call took from it appends in order."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[Command] = []

    def append(self, cmd: Command) -> None:
        self._items.append(cmd)

    def extend(self, cmds: Iterable[Command]) -> None:
        self._items.extend(cmds)

    def take(self) -> list[Command]:
        """The commands made since the last take."""
        items = self._items
        if not items:
            return []
        taken = items[:]
        items.clear()
        return taken
