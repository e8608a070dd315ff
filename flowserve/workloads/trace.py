"""JSONL traces: record every query a simulation ran, and replay such a file exactly.

One line per query: id, arrival, tenant, priority, workflow, attrs and its steps, with
prompts as segment lists ([id, length]), so sharing structure survives.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from flowserve.errors import ConfigError
from flowserve.graph.plan import CallStep, DagNode, DagPlan, OpStep, QueryPlan, Segment
from flowserve.graph.replay import Expectation
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
        return OpStep(str(x["stage"]), str(x["op"]), float(x["duration"]), bool(x.get("error")))
    prompt = tuple(Segment(int(i), int(n)) for i, n in x["prompt"])
    return CallStep(str(x["stage"]), prompt, int(x["output"]))


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
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise ConfigError(f"cannot read trace {str(path)!r}: {e.strerror}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
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
            specs.append(QuerySpec(int(d["id"]), float(d["arrival"]), plan,
                                   str(d.get("tenant", "default")), int(d.get("priority", 0))))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AssertionError) as e:
            raise ConfigError(f"{path}:{n}: not a flowserve trace line ({e})") from None
    if not specs:
        raise ConfigError(f"trace {str(path)!r} holds no queries")
    specs.sort(key=lambda q: q.arrival)
    return Workload(f"trace:{Path(path).stem}", tuple(specs), expectations_for(specs),
                    text2sql.output_priors())
