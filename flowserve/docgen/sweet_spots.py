"""The sweet-spot table: each built-in cluster's engine profiles and the batch the
`flowserve` queue lets them run (`flowserve.profiles.sweet_spot`), per context length."""

from __future__ import annotations

from pathlib import Path

from flowserve.cluster import BUILTIN_CLUSTERS
from flowserve.policies.flowserve_queue import FlowserveQueue
from flowserve.profiles.fitted import load_profile
from flowserve.profiles.instance import roofline_for
from flowserve.profiles.sweet_spot import DEFAULT_GAIN, sweet_spot

FITTED = Path(__file__).resolve().parents[2] / "examples/profiles/tiny-llama.yaml"  # 4 slots, 2 cores
CONTEXTS = (512, 2048, 8192, 32768)  # tokens per running sequence

INTRO = f"""\
# Batching sweet spots

Generated from the built-in clusters' cost models (`python -m flowserve.docgen`). The
`flowserve` queue releases a call to an engine only while the engine's running batch stays
within its **sweet spot**: the largest batch whose last sequence still adds at least
`gain` ({DEFAULT_GAIN}) of a lone sequence's decode throughput
(`flowserve/profiles/sweet_spot.py`). Beyond it an added call slows every running one more
than it adds, so calls wait in the core, where urgency, programs' attained service, tenant
fair shares and the batch filler order them. Batch work beside interactive work grows only
to the stricter spot at `batch_gain` ({FlowserveQueue().batch_gain}). A memory-bound decode
step (small models, short contexts) batches far; long contexts, whose KV reads grow with
the batch, batch less. A fitted profile (`flowserve profile`) has its own spot: the tiny
CPU llama-server's step doubles with the batch, so its spot is one sequence.

Columns: the running sequences' mean context in tokens; cells: the sweet spot at `gain`
/ at `batch_gain`, capped by the engine's slots (`max_num_seqs`).
"""


def sweet_spot_table() -> str:
    beside = FlowserveQueue().batch_gain
    seen: set[tuple[str, str, int]] = set()
    rows = [INTRO, "| cluster | GPU | model | TP | " + " | ".join(f"{c:,}" for c in CONTEXTS) + " |",
            "|---|---|---|---|" + "---|" * len(CONTEXTS)]
    for cluster, specs in BUILTIN_CLUSTERS.items():
        for spec in specs:
            key = (spec.gpu, spec.model, spec.tp)
            if not spec.gpu or key in seen:
                continue
            seen.add(key)
            cost, cap = roofline_for(spec), spec.engine.max_num_seqs
            cells = [f"{sweet_spot(cost, c, cap, DEFAULT_GAIN)} / {sweet_spot(cost, c, cap, beside)}" for c in CONTEXTS]
            rows.append(f"| {cluster} | {spec.gpu} | {spec.model} | {spec.tp} | " + " | ".join(cells) + " |")
    if FITTED.is_file():  # a source checkout: the example's fitted CPU profile
        cost = load_profile(FITTED)
        cells = [f"{sweet_spot(cost, c, 4, DEFAULT_GAIN)} / {sweet_spot(cost, c, 4, beside)}" for c in CONTEXTS]
        rows.append("| examples/profiles/tiny-llama.yaml | CPU | tiny GGUF | 1 | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"
