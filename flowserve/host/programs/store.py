"""Where the host's programs are kept beyond this process: the strategy `LivePrograms` is
built with, chosen once by the composition root (`flowserve.host.root`) — this process
alone (`LocalPrograms`), or the replicas' registry in Redis (`SharedPrograms`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from flowserve.host.intake.openai_api import APIError
from flowserve.host.intake.tenancy import Headers
from flowserve.host.programs.open_program import OpenProgram
from flowserve.host.query import CallHandle
from flowserve.replicas.programs import ProgramRecord
from flowserve.types.programs import ProgramEnd


class LocalBook(Protocol):
    """The host's programs (`flowserve.host.programs.book.LivePrograms`), as a store ends them."""

    @property
    def open(self) -> Mapping[tuple[str, str], OpenProgram]: ...

    def close(self, prog: OpenProgram, how: ProgramEnd) -> None: ...
    def sweep(self) -> None: ...
    async def end_here(self, tenant: str, program_id: str) -> OpenProgram | None: ...


class ProgramStore(Protocol):
    @property
    def local(self) -> bool:
        """Whether this process decides alone now (its own limits and summaries)."""
        ...

    async def adopt(self, prog: OpenProgram, hdr: Headers, ended_error: Callable[[OpenProgram], APIError]
                    ) -> float | None:
        """A program opening here: its settings from the store (an APIError if it ended
        there); returns its deadline, in seconds from now."""
        ...

    async def count(self, prog: OpenProgram) -> ProgramRecord | None:
        """Count the call `prog.calls` just counted (APIError: over a limit); its record,
        when the store has one."""
        ...

    def answer(self, prog: OpenProgram, ch: CallHandle) -> CallHandle:
        """The handle the call's client awaits."""
        ...

    async def state(self, tenant: str, program_id: str) -> dict[str, Any] | None:
        """`GET`'s answer from the store (None: decide here)."""
        ...

    async def delete(self, program_id: str, tenant: str, book: LocalBook) -> tuple[dict[str, Any] | None, bool]:
        """`DELETE` in the store: (its summary, when the store decided; whether a summary
        decided here is partial)."""
        ...

    async def sweep(self, book: LocalBook) -> None:
        """End the programs idle or past their duration."""
        ...

    def pending(self, progs: Iterable[OpenProgram]) -> int:
        """Parts the store does not hold yet."""
        ...

    async def restore_all(self, progs: Iterable[OpenProgram]) -> None:
        """Write every part again (the store lost them)."""
        ...


class LocalPrograms:
    """This process's programs are all there is."""

    local = True

    async def adopt(self, prog: OpenProgram, hdr: Headers, ended_error: Callable[[OpenProgram], APIError]
                    ) -> float | None:
        return hdr.slo_s

    async def count(self, prog: OpenProgram) -> ProgramRecord | None:
        return None

    def answer(self, prog: OpenProgram, ch: CallHandle) -> CallHandle:
        return ch

    async def state(self, tenant: str, program_id: str) -> dict[str, Any] | None:
        return None

    async def delete(self, program_id: str, tenant: str, book: LocalBook) -> tuple[dict[str, Any] | None, bool]:
        return None, False

    async def sweep(self, book: LocalBook) -> None:
        book.sweep()

    def pending(self, progs: Iterable[OpenProgram]) -> int:
        return 0

    async def restore_all(self, progs: Iterable[OpenProgram]) -> None:
        return None
