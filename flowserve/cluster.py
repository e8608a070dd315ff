"""Built-in cluster layouts (SPEC §4)."""

from __future__ import annotations

from flowserve.types import EngineParams, InstanceSpec


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
    "preble-a6000": _instances("mistral-7b", 1, [(f"a6000-{i}", "A6000") for i in range(4)]),
    "preble-h100": _instances("llama-3-70b", 4, [(f"h100x4-{i}", "H100") for i in range(2)]),
    # Teola's setup: an LLM engine plus one instance of each non-LLM component (default
    # cost profiles, `flowserve.profiles.ops`)
    "teola": (*_instances("llama-2-13b", 1, [("llm-0", "A100-80G")]),
              *(InstanceSpec(f"{kind}-0", "", kind, kind=kind) for kind in ("embedding", "reranker", "vector_db",
                                                                            "search"))),
}
