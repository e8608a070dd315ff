"""`--explain`: the plan of each LLM operator without calling any engine — column order,
calls, prompt tokens, the planned order's token hit rate, time and cost from the cost
model. Operators after an LLM filter see the rows modelled answers let through."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flowserve.profiles.instance import roofline_for
from flowserve.sql.estimate import estimate_time_s, prefix_hits, token_hit_rate
from flowserve.sql.planner import PlannedOp
from flowserve.types.specs import InstanceSpec

USD_PER_GPU_HOUR = 1.0  # a round price; scale the `usd` figure to your provider's


def explain_ops(planned: Sequence[PlannedOp], cluster: Sequence[InstanceSpec]) -> list[dict[str, Any]]:
    cost = roofline_for(cluster[0])
    batch = cluster[0].engine.max_num_seqs
    gpus = sum(s.tp for s in cluster)
    out = []
    for p in planned:
        reqs = p.requests
        prompt = sum(r.tokens for r in reqs)
        hits = sum(prefix_hits([r.parts for r in reqs]))
        outputs = sum(r.max_tokens for r in reqs)
        t = estimate_time_s(cost, prompt, hits, outputs, len(reqs), batch) / max(1, len(cluster))
        out.append({"op": p.op.fn, "template": p.op.template.text[:60],
                    "column_order": [list(o) for o, _ in p.orders.most_common(3)],
                    "rows": len(p.row_request), "calls": len(reqs), "prompt_tokens": prompt,
                    "token_hit_rate": round(token_hit_rate(hits, prompt), 4), "dedup_saved": p.dedup_saved,
                    "solver_s": round(p.solver_s, 4), "time_s": round(t, 3),
                    "gpu_s": round(t * gpus, 3), "usd": round(t * gpus * USD_PER_GPU_HOUR / 3600, 5)})
    return out
