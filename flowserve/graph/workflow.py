"""The one workflow API: a workflow is written once and runs in the simulator and the gateway.

A `Workflow` is a per-query object (its constructor takes the query's inputs and
configuration) with two hooks that build the query's graph through a `Graph`:

    class Answer(Workflow):
        def __init__(self, question: str) -> None:
            self.question = question

        def start(self, g: Graph) -> None:
            plan = g.llm("plan", ["Plan the search for: ", self.question], max_tokens=64)
            hits = g.tool("search", "web_search", query=plan.out)    # reads plan's output
            g.llm("answer", ["Answer ", self.question, " from:\n", hits], max_tokens=256)

        def on_done(self, g: Graph, key: str, result: NodeResult) -> None:
            ...  # grow the graph: another round, more candidates, a branch

Dependencies come from the data a step reads (`plan.out`, a step handle inside a
prompt) or are declared with `a >> b`. Everything a hook adds is one batch: the
runtime runs the graph passes on it, checks it (unknown dependencies, duplicates,
cycles) and issues each step when its dependencies finished. Hooks never do IO: LLM
calls and tools are run by the driver (real engines and tools in the gateway; modelled
lengths, durations and errors in the simulator).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from flowserve.errors import WorkflowError
from flowserve.graph.nodes import CallEstimate, LLMNode, Node, NodeResult, OpNode
from flowserve.graph.prompt import Chat, Out, Readable, as_chat, as_prompt, refs


class Workflow:
    """Base class of workflows (see the module docstring).

    An *open-ended* workflow (`open_ended = True`: a program, whose calls come from a
    client one by one) grows from outside: `on_input` turns each input the driver
    delivers (`QueryInput`) into steps until the query is closed (`QueryClosed`, then
    `on_close`). Its steps are answered one by one (`StepDone`), a step that fails or is
    cancelled ends alone (its result carries the error and the query goes on).

    A workflow that `learns_remaining` does not know the calls it still makes: the core
    predicts them from finished queries of the same name (stage priors); programs do.
    `attrs` describe the query to tools that record it (the α tuner's trace: a replayed
    plan's own attributes, e.g. its database). `tools` are the functions the gateway runs
    for the workflow's own ops (op name → function of the op's arguments, in a worker).
    """

    name: ClassVar[str] = "workflow"
    open_ended: ClassVar[bool] = False
    learns_remaining: bool = False
    attrs: Mapping[str, Any] = MappingProxyType({})
    tools: ClassVar[Mapping[str, Callable[[Mapping[str, Any]], Any]]] = MappingProxyType({})

    def start(self, g: Graph) -> None:
        raise NotImplementedError

    def on_input(self, g: Graph, data: Any) -> None:
        """Input delivered to the open query (open-ended workflows only)."""
        raise WorkflowError(f"workflow {self.name!r} takes no input after it started")

    def on_close(self, g: Graph) -> None:
        """The open query takes no more input; last steps may still be added."""

    def on_done(self, g: Graph, key: str, result: NodeResult) -> None:
        """A step finished (result.error is set when a tool failed)."""

    def expected_remaining(self) -> Sequence[CallEstimate]:
        """LLM calls still to come that are not in the graph yet (deadline budgets)."""
        return ()

    def output(self, results: Mapping[str, NodeResult]) -> dict[str, Any]:
        """The query's answer once every step finished."""
        return {}


@dataclass(eq=False)
class _Draft:
    key: str
    stage: str
    deps: list[str]
    fields: dict[str, Any]
    llm: bool


@dataclass(eq=False)
class Step(Readable):
    """A handle on a step of the current batch (or an earlier one)."""

    graph: Graph
    key: str

    @property
    def out(self) -> Out:
        """Its output, for a reader that needs it."""
        return Out(self.key)

    @property
    def optional(self) -> Out:
        """Its output for a reader that also runs when the output is missing (a join)."""
        return Out(self.key, optional=True)

    def __rshift__(self, other: Step | Iterable[Step]) -> Step | Iterable[Step]:
        for s in [other] if isinstance(other, Step) else other:
            self.graph.depend(s.key, self.key)
        return other

    def __rrshift__(self, other: Iterable[Step]) -> Step:
        for s in other:
            self.graph.depend(self.key, s.key)
        return self


class Graph:
    """Builds a query's graph from inside a workflow's hooks; read results with `result`."""

    def __init__(self, results: Mapping[str, NodeResult]) -> None:
        self._results = results
        self._drafts: dict[str, _Draft] = {}

    def llm(self, key: str, prompt: Any = None, *, max_tokens: int, stage: str | None = None,
            after: Iterable[Step | str] = (), model: str | None = None,
            params: Mapping[str, Any] | None = None, splittable: bool = False,
            chain: Iterable[Step | str] = (), messages: Sequence[Mapping[str, Any]] | None = None,
            tools: Sequence[Mapping[str, Any]] = (), response_format: Mapping[str, Any] | None = None) -> Step:
        """An LLM step: a `prompt` (parts), or chat `messages` (OpenAI-style; content may
        be text, parts or step handles) with `tools` offered. `response_format` (OpenAI's:
        `json_object`, `json_schema`) constrains the answer on engines that support it; the
        simulator models only lengths. Sampling parameters go in `params`."""
        if (prompt is None) == (messages is None):
            raise WorkflowError(f"step {key!r}: give either a prompt or chat messages")
        if tools and messages is None:
            raise WorkflowError(f"step {key!r}: tools are offered in chats: give messages")
        try:
            parts = as_prompt(prompt) if messages is None else (as_chat(messages, tools),)
        except TypeError as e:
            raise WorkflowError(f"step {key!r}: {e}") from None
        if any(isinstance(p, Chat) for p in parts) and len(parts) > 1:
            raise WorkflowError(f"step {key!r}: a chat is a prompt of its own; give it as messages")
        if response_format is not None:
            params = {**(params or {}), "response_format": dict(response_format)}
        if not parts or (messages is not None and not messages):
            raise WorkflowError(f"step {key!r}: empty prompt")
        if max_tokens < 1:
            raise WorkflowError(f"step {key!r}: max_tokens must be ≥ 1, got {max_tokens}")
        return self._add(key, stage, after, refs(parts), True,
                         {"prompt": parts, "max_tokens": max_tokens, "model": model,
                          "params": dict(params or {}), "splittable": splittable}, chain)

    def tool(self, key: str, op: str, *, stage: str | None = None, after: Iterable[Step | str] = (),
             batchable: bool = False, chain: Iterable[Step | str] = (), **args: Any) -> Step:
        """A non-LLM step. `chain`: steps it follows only by module order (no data), which
        the `prune` pass drops; `after`: order the step really needs."""
        args = {k: (v.out if isinstance(v, Step) else v) for k, v in args.items()}
        reads = tuple(v.step for v in args.values() if isinstance(v, Out))
        return self._add(key, stage or op, after, reads, False, {"op": op, "args": args, "batchable": batchable},
                         chain)

    def add(self, node: Node) -> Step:
        """A ready-made node (replayed graphs, passes' output), dependencies as given."""
        fields = {f: getattr(node, f) for f in node.__dataclass_fields__
                  if f not in ("key", "stage", "deps", "chain")}
        if isinstance(node, LLMNode):
            fields["prompt"] = as_prompt(node.prompt)  # a clear error for anything but parts
        return self._add(node.key, node.stage, node.deps, node.refs, isinstance(node, LLMNode), fields, node.chain)

    def result(self, key: str) -> NodeResult | None:
        return self._results.get(key)

    def depend(self, key: str, on: str) -> None:
        """`key` runs after `on`; only steps of the current batch take new dependencies."""
        draft = self._drafts.get(key)
        if draft is None:
            raise WorkflowError(f"step {key!r} was issued in an earlier batch; add dependencies "
                                f"when the step is created")
        if on not in draft.deps:
            draft.deps.append(on)

    def _add(self, key: str, stage: str | None, after: Iterable[Step | str], reads: tuple[str, ...],
             llm: bool, fields: dict[str, Any], chain: Iterable[Step | str] = ()) -> Step:
        if not isinstance(key, str) or not key:
            raise WorkflowError(f"step keys are non-empty strings, got {key!r}")
        if key in self._drafts:
            raise WorkflowError(f"duplicate workflow node(s) [{key!r}]")
        deps = [a.key if isinstance(a, Step) else str(a) for a in after] if after else []
        needed = set(deps) | set(reads) if chain else None
        if reads:
            deps += [r for r in reads if r not in deps]
        if needed is not None:
            order = tuple(dict.fromkeys(c.key if isinstance(c, Step) else str(c) for c in chain))
            deps += [c for c in order if c not in deps]
            fields["chain"] = tuple(c for c in order if c not in needed)
        else:
            fields["chain"] = ()
        self._drafts[key] = _Draft(key, stage or key, deps, fields, llm)
        return Step(self, key)

    def take(self) -> list[Node]:
        """The batch built so far, as frozen nodes (the builder is empty afterwards)."""
        nodes: list[Node] = []
        for d in self._drafts.values():
            if d.llm:
                nodes.append(LLMNode(d.key, d.stage, deps=tuple(d.deps), **d.fields))
            else:
                nodes.append(OpNode(d.key, d.stage, deps=tuple(d.deps), **d.fields))
        self._drafts = {}
        return nodes
