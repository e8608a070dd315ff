"""Teola's graph passes (§4.2), each a pure function on a batch of nodes.

* `prune_dependencies` — keep only the edges that carry data: a module chain's
  order-only edges (`chain=`) go, so independent branches run in parallel;
* `decompose_stages` — a batchable op with more units than its component runs
  efficiently is split into micro-batches, pipelined with its batchable successor
  (micro-batch j of the successor waits only for micro-batch j), plus an aggregate that
  keeps the original key (readers see one value, as before);
* `split_prefill` — an LLM call whose prompt begins with ready parts (instruction,
  question) and then reads an unfinished step gets a partial prefill of those parts
  (max_tokens 1): it warms the prefix cache while upstream context is produced; a call
  reading several steps, the earlier ones ready before the last (a refine call's chunk
  before the previous refine's answer), gets a staged prefill up to its last input;
* `pipeline_decode` — the `part` steps of a splittable LLM output are completed from
  the call's progress (each part as soon as the engine produced it), not at its end.

Passes read the batch and the graph so far (`PassContext`) and return new nodes; they
never do IO. Each is tested on a small graph (tests/graph/test_optimize.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from flowserve.graph.nodes import LLMNode, Node, NodeResult, OpNode
from flowserve.graph.primitives import AGGREGATE, PART, micro_key, op_units
from flowserve.graph.prompt import Out, estimate_tokens


@dataclass(frozen=True)
class PassContext:
    """What a pass may read besides the batch: the graph so far and its results."""

    nodes: Mapping[str, Node]
    results: Mapping[str, NodeResult]
    # op name → the micro-batch size (units) its component runs efficiently, from the
    # component's cost profile (`flowserve.profiles.ops`); absent ops are never split
    batch_sizes: Mapping[str, int] = field(default_factory=dict)


GraphPass = Callable[[Sequence[Node], PassContext], Sequence[Node]]

MIN_PREFILL_TOKENS = 16  # a shorter ready prefix is not worth a request of its own


def prune_dependencies(nodes: Sequence[Node], ctx: PassContext) -> list[Node]:
    """Drop order-only (module chain) edges; data edges and declared `after` edges stay."""
    out: list[Node] = []
    for n in nodes:
        if n.chain:
            n = dataclasses.replace(n, deps=tuple(d for d in n.deps if d not in n.chain), chain=())
        out.append(n)
    return out


def _micro_sizes(units: int, size: int) -> list[int]:
    full, rest = divmod(units, size)
    return [size] * full + ([rest] if rest else [])


def decompose_stages(nodes: Sequence[Node], ctx: PassContext) -> list[Node]:
    """Split oversized batchable ops into micro-batches sized from the component's cost
    profile (`ctx.batch_sizes`), pipelined along chains of batchable ops of equal size."""
    readers: dict[str, list[Node]] = {}
    for n in nodes:
        for r in n.refs:
            readers.setdefault(r, []).append(n)

    def size_of(n: Node) -> int | None:
        if isinstance(n, OpNode) and n.batchable:
            return ctx.batch_sizes.get(n.op)
        return None

    replaced: dict[str, list[Node]] = {}
    for n in nodes:
        size = size_of(n)
        if n.key in replaced or size is None or op_units(n.args) <= size:  # type: ignore[union-attr]
            continue
        assert isinstance(n, OpNode)
        units = op_units(n.args)
        chain = [n]
        while True:
            nxt = readers.get(chain[-1].key, [])
            if (len(nxt) == 1 and size_of(nxt[0]) and nxt[0].refs == (chain[-1].key,)
                    and op_units(nxt[0].args) == units):  # type: ignore[union-attr]
                chain.append(nxt[0])
            else:
                break
        sizes = _micro_sizes(units, size)
        prev: str | None = None
        for c in chain:
            assert isinstance(c, OpNode)
            parts: list[Node] = []
            for j, s in enumerate(sizes):
                args = dict(c.args)
                # the slice of the op's items this micro-batch takes (the last takes the rest:
                # live, the real item count may differ from the estimated units)
                args.update(start=j * size, last=j == len(sizes) - 1)
                deps = c.deps
                if prev is not None:
                    args = {k: (dataclasses.replace(v, step=micro_key(prev, j)) if isinstance(v, Out) and v.step == prev
                                else v)
                            for k, v in args.items()}
                    deps = tuple(micro_key(prev, j) if d == prev else d for d in deps)
                args.update(units=s, micro=j)
                parts.append(OpNode(micro_key(c.key, j), c.stage, c.op, deps, args, True, c.chain))
            agg = OpNode(c.key, c.stage, AGGREGATE, tuple(p.key for p in parts),
                         {f"p{j}": Out(p.key) for j, p in enumerate(parts)})
            replaced[c.key] = [*parts, agg]
            prev = c.key
    out: list[Node] = []
    for n in nodes:
        out.extend(replaced.get(n.key, (n,)))
    return out


def split_prefill(nodes: Sequence[Node], ctx: PassContext) -> list[Node]:
    """Partial prefill of the ready prompt prefix of calls that wait on upstream output;
    calls sharing the same ready prefix share one prefill. A call that waits on several
    outputs gets a second, staged prefill — of its prompt up to its last input — when its
    earlier inputs come before that one (they are upstream of it, or parts of an upstream
    output): a refine call's instruction, question and chunk are prefilled while the
    previous refine still writes the answer it extends."""
    made: dict[tuple, str] = {}
    out: list[Node] = []
    extra: list[Node] = []
    graph: dict[str, Node] = {**ctx.nodes, **{n.key: n for n in nodes}}
    for n in nodes:
        if not isinstance(n, LLMNode) or n.kind != "llm":
            out.append(n)
            continue
        waits = [i for i, p in enumerate(n.prompt) if isinstance(p, Out) and p.step not in ctx.results]
        if not waits:
            out.append(n)
            continue
        deps = list(n.deps)
        prefix = n.prompt[:waits[0]]
        if prefix and not any(isinstance(p, Out) for p in prefix) and estimate_tokens(prefix) >= MIN_PREFILL_TOKENS:
            first = made.get((n.model, prefix))
            if first is None:
                first = made[(n.model, prefix)] = f"{n.key}.prefill"
                extra.append(LLMNode(first, f"{n.stage}.prefill", prefix, 1, (), n.model, kind="prefill"))
            deps.append(first)
        last = n.prompt[waits[-1]]
        early = [n.prompt[i].step for i in waits[:-1]]  # type: ignore[union-attr]
        if early and all(_comes_before(e, last.step, graph) for e in early):  # type: ignore[union-attr]
            staged = f"{n.key}.prefill2"
            extra.append(LLMNode(staged, f"{n.stage}.prefill", n.prompt[:waits[-1]], 1, (*early, *deps[len(n.deps):]),
                                 n.model, kind="prefill"))
            deps.append(staged)
        out.append(dataclasses.replace(n, deps=tuple(deps)) if len(deps) > len(n.deps) else n)
    return extra + out


def _upstream(key: str, graph: Mapping[str, Node]) -> set[str]:
    """Every step `key` depends on, directly or not."""
    seen: set[str] = set()
    todo = list(graph[key].deps) if key in graph else []
    while todo:
        k = todo.pop()
        if k not in seen:
            seen.add(k)
            todo.extend(graph[k].deps if k in graph else ())
    return seen


def _comes_before(step: str, later: str, graph: Mapping[str, Node]) -> bool:
    """`step`'s output is ready by the time `later` starts: `step` is upstream of it, or a
    part (instant) of an output upstream of it."""
    up = _upstream(later, graph)
    n = graph.get(step)
    return step in up or (isinstance(n, OpNode) and n.op == PART and bool(n.refs) and n.refs[0] in up)


def pipeline_decode(nodes: Sequence[Node], ctx: PassContext) -> list[Node]:
    """Stream the parts of unfinished splittable LLM outputs to their readers."""
    splittable = {n.key for n in nodes if isinstance(n, LLMNode) and n.splittable}
    splittable |= {k for k, n in ctx.nodes.items()
                   if isinstance(n, LLMNode) and n.splittable and k not in ctx.results}
    out: list[Node] = []
    for n in nodes:
        if isinstance(n, OpNode) and n.op == PART and n.refs and n.refs[0] in splittable:
            n = dataclasses.replace(n, args={**n.args, "stream": True})
        out.append(n)
    return out
