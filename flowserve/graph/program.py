"""A program: any client's LLM calls, one by one, as one open-ended workflow.

An application (a LangGraph agent, a hand-written loop, a RAG service) makes its calls
over the OpenAI API; calls that name the same program become steps of one query in the
core, which then schedules them knowing the program's deadline, its attained service,
its stages and the calls it is likely still to make. Each call arrives as a
`ProgramCall` (`QueryInput`), becomes one LLM step at once and is answered on its own
(`StepDone`); the query finishes when the program is closed and its calls are done.

The client states no dependencies; the program infers them from its threads, so the
critical path (Autellix's ATLAS) follows what the client could have seen: a call
follows the last finished call of its own thread and every other thread's last call that
finished after that (a join); the first call of a new thread follows the program's
latest finished call (the fork). Only finished calls are named, so a call never waits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowserve.errors import WorkflowError
from flowserve.graph.nodes import NodeResult
from flowserve.graph.workflow import Graph, Workflow

PROGRAM_WORKFLOW = "program"  # the workflow name of programs (metrics, stage priors)
MAIN_THREAD = "main"


@dataclass(frozen=True, slots=True)
class ProgramCall:
    """One call of a program: its step key (unique in the program), prompt parts, and
    the stage and thread the client named."""

    key: str
    prompt: tuple[Any, ...]
    max_tokens: int
    stage: str
    thread: str = MAIN_THREAD
    model: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


class Program(Workflow):
    name = PROGRAM_WORKFLOW
    open_ended = True
    learns_remaining = True

    def __init__(self, program_id: str = "") -> None:
        self.program_id = program_id
        self.threads: dict[str, str] = {}  # step → its thread
        self._last: dict[str, tuple[str, int]] = {}  # thread → (its last finished step, finish order)
        self._finished = 0

    def start(self, g: Graph) -> None:
        """Nothing: a program's calls come as inputs."""

    def on_input(self, g: Graph, data: Any) -> None:
        if not isinstance(data, ProgramCall):
            raise WorkflowError(f"a program takes ProgramCall inputs, got {type(data).__name__}")
        if data.key in self.threads:
            raise WorkflowError(f"program step {data.key!r} was sent twice")
        self.threads[data.key] = data.thread
        g.llm(data.key, data.prompt, max_tokens=data.max_tokens, stage=data.stage, after=self._after(data.thread),
              model=data.model, params=data.params)

    def _after(self, thread: str) -> list[str]:
        own = self._last.get(thread)
        if own is None:  # a new thread forks from the latest finished call
            latest = max(self._last.values(), key=lambda e: e[1], default=None)
            return [] if latest is None else [latest[0]]
        return [own[0], *(key for t, (key, order) in self._last.items() if t != thread and order > own[1])]

    def on_done(self, g: Graph, key: str, result: NodeResult) -> None:
        self._finished += 1
        self._last[self.threads[key]] = (key, self._finished)

    def output(self, results: Mapping[str, NodeResult]) -> dict[str, Any]:
        return program_summary(self.program_id, results, self.threads)


def program_summary(program_id: str, results: Mapping[str, NodeResult],
                    threads: Mapping[str, str]) -> dict[str, Any]:
    """What a finished program did: its calls (answered, failed or cancelled), their
    tokens and where they ran."""
    done = [r for r in results.values() if r.error is None]
    return {
        "program": program_id,
        "calls": len(results),
        "failed_calls": len(results) - len(done),
        "prompt_tokens": sum(r.prompt_tokens for r in done),
        "cached_tokens": sum(r.cached_tokens for r in done),
        "output_tokens": sum(r.output_tokens for r in done),
        "threads": sorted(set(threads.values())),
        "steps": {key: {"stage": r.stage, "thread": threads.get(key, MAIN_THREAD), "instance": r.instance,
                        "error": r.error} for key, r in results.items()},
    }
