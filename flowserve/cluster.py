"""Built-in cluster layouts (SPEC §4): the names every `--cluster` option accepts."""

from __future__ import annotations

from flowserve.profiles.ops import PAPER_PROFILES
from flowserve.types.specs import EngineParams, InstanceSpec, LoraSpec


def _instances(model: str, tp: int, layout: list[tuple[str, str]],
               engine: EngineParams | None = None) -> tuple[InstanceSpec, ...]:
    eng = engine or EngineParams()
    return tuple(InstanceSpec(name, gpu, model, tp, engine=eng, reports_capacity=True) for name, gpu in layout)


# SPEC §4: Hexgen's clusters serve Llama-3.1-70B with TP 8 per instance; Preble's two.
BUILTIN_CLUSTERS: dict[str, tuple[InstanceSpec, ...]] = {
    "hetero-1": _instances("llama-3.1-70b", 8, [
        ("a100-0", "A100-80G"), ("a100-1", "A100-80G"), ("a6000-0", "A6000"), ("a6000-1", "A6000"),
    ]),
    "hetero-2": _instances("llama-3.1-70b", 8, [
        ("a100-0", "A100-80G"), ("a100-1", "A100-80G"), ("a6000-0", "A6000"), ("l40-0", "L40"),
    ]),
    # Four GPU types serving Llama-3.1-8B (`bench slo`: per-request TTFT/TPOT objectives on a
    # heterogeneous pool, where llm-d's guide says its latency predictor must not be used)
    "hetero-3": _instances("llama-3.1-8b", 1, [
        ("h100-0", "H100"), ("a100-0", "A100-80G"), ("l40s-0", "L40S"), ("l40s-1", "L40S"), ("l4-0", "L4"),
        ("l4-1", "L4"),
    ]),
    "preble-a6000": _instances("mistral-7b", 1, [(f"a6000-{i}", "A6000") for i in range(4)]),
    # LoRA serving (docs/policies.md, models and adapters): Llama-3.1-8B with 32 adapters on
    # four A100s, four adapters per batch (`--max-loras 4`), for the `lora` workload
    "lora-a100": _instances("llama-3.1-8b", 1, [(f"a100-{i}", "A100-80G") for i in range(4)],
                            EngineParams(lora=LoraSpec(tuple(f"lora-{k}" for k in range(32)), max_loras=4))),
    "preble-h100": _instances("llama-3-70b", 4, [(f"h100x4-{i}", "H100") for i in range(2)]),
    # LLM-in-SQL's testbed (Liu et al.): Llama-3-8B on one L4
    "paper-l4": _instances("llama-3.1-8b", 1, [("l4", "L4")]),
    # Teola's testbed (§7): two instances of each LLM — the core, Llama-2-13B, on 2 RTX 3090
    # each, and the judge of search-augmented generation, Llama-2-7B, on one — and one
    # instance of each non-LLM component with its profile on a 3090 (`flowserve.profiles.ops`)
    "teola": (*_instances("llama-2-13b", 2, [("llm-0", "RTX3090"), ("llm-1", "RTX3090")]),
              *_instances("llama-2-7b", 1, [("judge-0", "RTX3090"), ("judge-1", "RTX3090")]),
              *(InstanceSpec(f"{kind}-0", "", kind, kind=kind, op_profile=PAPER_PROFILES[kind])
                for kind in ("embedding", "reranker", "vector_db", "search"))),
}
