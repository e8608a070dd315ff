"""`--explain`: each LLM operator's candidate plans with their estimates from the engine
model (`engine_model.py`) and the plan chosen — without calling any engine and without
running the statement. Operators after an LLM filter see the rows modelled answers let
through; operators the statement calls per chunk (in a subquery, HAVING, ORDER BY) are
listed without estimates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flowserve.sql.planner import LLMOp, PlannedOp

USD_PER_GPU_HOUR = 1.0  # a round price; scale the `usd` figure to your provider's


def explain_ops(planned: Sequence[PlannedOp], unplanned: Sequence[LLMOp] = (), gpus: int = 1) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in planned:
        chosen = next(e for e in p.estimates if e.plan == p.chosen)
        out.append({
            "op": p.op.fn, "instruction": p.op.template.instruction[:80], "rows": len(p.row_request),
            "rows_failed_before_calls": sum(e is not None for e in p.row_error),
            "plan": p.chosen, "calls": len(p.requests), "prompt_tokens": chosen.prompt_tokens,
            "token_hit_rate": round(chosen.hit_rate, 4), "time_s": round(chosen.time_s, 3),
            "gpu_s": round(chosen.time_s * gpus, 3), "usd": round(chosen.time_s * gpus * USD_PER_GPU_HOUR / 3600, 5),
            "dedup_saved": p.dedup_saved, "solver_s": round(p.solver_s, 4),
            "column_order": [list(o) for o, _ in p.orders.most_common(3)],
            "candidates": [{"plan": e.plan, "calls": e.calls, "prompt_tokens": e.prompt_tokens,
                            "token_hit_rate": round(e.hit_rate, 4), "time_s": round(e.time_s, 3),
                            "solver_s": round(e.solver_s, 4)} for e in p.estimates]})
    for op in unplanned:
        out.append({"op": op.fn, "instruction": op.template.instruction[:80], "plan": "per chunk",
                    "note": "called per chunk while the statement runs (subquery, HAVING, ORDER BY): "
                            "no estimate before it runs"})
    return out


def explain_text(plan: Sequence[dict[str, Any]], cluster: str) -> str:
    """The plan, readable: per operator its rows and choice, then every candidate."""
    if not plan:
        return "no LLM operators: the statement calls no LLM"
    lines = [f"estimates: the engine model of {cluster} (no engine called, the statement not run)"]
    for i, op in enumerate(plan, 1):
        lines.append(f"{i}. {op['op']}('{op['instruction']}')")
        if "candidates" not in op:
            lines.append(f"   {op['note']}")
            continue
        lines.append(f"   {op['rows']} rows ({op['rows_failed_before_calls']} fail before any call) → "
                     f"{op['calls']} calls, plan {op['plan']}: {op['time_s']:.2f} s, token hit rate "
                     f"{op['token_hit_rate']:.1%}, {op['gpu_s']:.1f} GPU·s (${op['usd']:.4f})")
        lines.append(f"   field order: {' → '.join(op['column_order'][0]) if op['column_order'] else '-'}"
                     f"{' (and other orders per group)' if len(op['column_order']) > 1 else ''}")
        lines.append(f"   {'candidate':<22}{'calls':>8}{'hit rate':>10}{'time s':>10}{'vs original':>13}")
        base = op["candidates"][0]["time_s"] or 1e-12
        for c in op["candidates"]:
            mark = "  ← chosen" if c["plan"] == op["plan"] else ""
            lines.append(f"   {c['plan']:<22}{c['calls']:>8}{c['token_hit_rate']:>10.1%}{c['time_s']:>10.2f}"
                         f"{base / (c['time_s'] or 1e-12):>12.2f}×{mark}")
    return "\n".join(lines)
