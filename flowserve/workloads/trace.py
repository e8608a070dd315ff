"""JSONL traces: record every query a simulation ran, and replay such a file exactly.

One line per query: id, arrival, tenant, priority, workflow, attrs, its model (when it names
one: a LoRA adapter, say) and its steps, with prompts as segment lists ([id, length]), so
sharing structure survives.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from flowserve.errors import ConfigError
from flowserve.graph.plan import MAX_SEGMENT, CallStep, DagNode, DagPlan, OpStep, QueryPlan, Segment
from flowserve.graph.replay import Expectation
from flowserve.limits import (
    MAX_OP_SECONDS,
    MAX_OUTPUT_TOKENS,
    MAX_QUERIES,
    MAX_SEED,
    WHY_OP,
    WHY_OUTPUT,
    WHY_PROMPT,
    WHY_QUERIES,
)
from flowserve.schema import read_text
from flowserve.workloads import text2sql
from flowserve.workloads.base import AppQuery, QuerySpec, Workload

# Workflows whose expected-remaining-calls model is known, for replays of recorded traces.
EXPECTATIONS: dict[str, Expectation] = {text2sql.WORKFLOW: text2sql.expected_remaining}


def expectations_for(specs: Iterable[QuerySpec]) -> dict[str, Expectation]:
    return {wf: EXPECTATIONS[wf] for wf in {q.plan.workflow for q in specs} if wf in EXPECTATIONS}


def _item(x: CallStep | OpStep) -> dict[str, Any]:
    if isinstance(x, CallStep):
        return {"stage": x.stage, "prompt": [[s.id, s.length] for s in x.prompt],
                "output": x.output_tokens}
    return {"stage": x.stage, "op": x.op, "duration": x.duration_s, "error": x.error}


def query_to_json(q: QuerySpec) -> dict[str, Any]:
    if isinstance(q.plan, AppQuery):
        raise ConfigError(f"query {q.id} is a {q.plan.workflow!r} app query: only generated and replayed "
                          f"workloads can be recorded as a trace (apps record their live runs)")
    d: dict[str, Any] = {"id": q.id, "arrival": q.arrival, "tenant": q.tenant, "priority": q.priority,
                         "workflow": q.plan.workflow, "attrs": dict(q.plan.attrs)}
    if q.model is not None:
        d["model"] = q.model
    if isinstance(q.plan, DagPlan):
        d["dag"] = [{"key": n.key, "deps": list(n.deps), **_item(n.item)} for n in q.plan.nodes]
    else:
        d["steps"] = [[_item(x) for x in step] for step in q.plan.steps]
    return d


def write_trace(path: str | Path, queries: Iterable[QuerySpec]) -> None:
    with open(path, "w") as f:
        for q in queries:
            f.write(json.dumps(query_to_json(q)) + "\n")


def _parse_item(x: dict[str, Any]) -> CallStep | OpStep:
    if "op" in x:
        duration = float(x["duration"])
        if not 0 <= duration <= MAX_OP_SECONDS:
            raise ValueError(f"op duration {duration} outside 0..{MAX_OP_SECONDS:,.0f} s ({WHY_OP})")
        return OpStep(str(x["stage"]), str(x["op"]), duration, bool(x.get("error")))
    prompt = tuple(_segment(i, n) for i, n in x["prompt"])
    if not prompt:
        raise ValueError("a call needs a non-empty prompt")
    output = int(x["output"])
    if not 1 <= output <= MAX_OUTPUT_TOKENS:
        raise ValueError(f"output {output} outside 1..{MAX_OUTPUT_TOKENS:,} ({WHY_OUTPUT})")
    return CallStep(str(x["stage"]), prompt, output)


def _segment(seg_id: Any, length: Any) -> Segment:
    i, n = int(seg_id), int(length)
    if not 0 <= i < MAX_SEED or not 1 <= n <= MAX_SEGMENT:
        raise ValueError(f"segment [{i}, {n}]: id must be 0..2^64 and length 1..{MAX_SEGMENT:,} ({WHY_PROMPT})")
    return Segment(i, n)


def check_dag(nodes: tuple[DagNode, ...]) -> None:
    """Recorded DAG nodes come in dependency order (so no cycle can hide in them)."""
    seen: set[str] = set()
    for n in nodes:
        if n.key in seen:
            raise ValueError(f"duplicate dag node {n.key!r}")
        for d in n.deps:
            if d not in seen:
                raise ValueError(f"dag node {n.key!r} depends on {d!r}, which is not listed before it")
        seen.add(n.key)


def read_trace(path: str | Path) -> Workload:
    specs = []
    lines = read_text(path, "trace").splitlines()
    if len(lines) > MAX_QUERIES:
        raise ConfigError(f"{path}: {len(lines):,} lines is above the limit of {MAX_QUERIES:,} queries "
                          f"({WHY_QUERIES})")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            if not isinstance(d, dict):
                raise ValueError("expected a JSON object")
            attrs = dict(d.get("attrs", {}))
            plan: QueryPlan | DagPlan
            if "dag" in d:
                nodes = tuple(DagNode(str(x["key"]), _parse_item(x), tuple(map(str, x["deps"])))
                              for x in d["dag"])
                check_dag(nodes)
                plan = DagPlan(str(d["workflow"]), nodes, attrs)
            else:
                steps = tuple(tuple(_parse_item(x) for x in step) for step in d["steps"])
                if not steps or any(not s for s in steps):
                    raise ValueError("a query needs at least one non-empty step")
                plan = QueryPlan(str(d["workflow"]), steps, attrs)
            arrival = float(d["arrival"])
            if not math.isfinite(arrival) or arrival < 0:
                raise ValueError(f"arrival must be a finite time ≥ 0, got {arrival}")
            model = d.get("model")
            if model is not None and not isinstance(model, str):
                raise ValueError(f"model must be a string, got {model!r}")
            specs.append(QuerySpec(int(d["id"]), arrival, plan,
                                   str(d.get("tenant", "default")), int(d.get("priority", 0)), model=model))
        except RecursionError:
            raise ConfigError(f"{path}:{n}: not a flowserve trace line (JSON nested too deeply)") from None
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AssertionError, OverflowError) as e:
            raise ConfigError(f"{path}:{n}: not a flowserve trace line ({e})") from None
    if not specs:
        raise ConfigError(f"trace {str(path)!r} holds no queries")
    dup = sorted(i for i, k in Counter(q.id for q in specs).items() if k > 1)
    if dup:
        raise ConfigError(f"{path}: duplicate query ids {dup[:5]}")
    specs.sort(key=lambda q: q.arrival)
    return Workload(f"trace:{Path(path).stem}", tuple(specs), expectations_for(specs),
                    text2sql.output_priors())
