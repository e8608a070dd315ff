"""Measure the roofline efficiencies (MFU for prefill, MBU for decode) on a real GPU.

Runs the matrix products and attention of one Llama-3.1-8B layer in bf16 with PyTorch at
prefill shapes (many tokens: compute bound) and decode shapes (few tokens: bound by
reading the weights / the KV cache), and reports achieved TFLOP/s and GB/s as fractions
of the catalog's peak for that GPU. Optional: needs a CUDA GPU and torch; not part of
the package or the tests. Usage: python benchmarks/gpu_calibration.py OUT.json [GPU-name]
"""

from __future__ import annotations

import json
import sys

import torch
import torch.nn.functional as F

PEAK = {"H100": (989e12, 3350e9), "H200": (989e12, 4800e9), "A100-80G": (312e12, 2039e9)}
HIDDEN, INTER, HEADS, KV_HEADS, HEAD_DIM, LAYERS = 4096, 14336, 32, 8, 128, 32
MATS = {"qkv": (HIDDEN, (HEADS + 2 * KV_HEADS) * HEAD_DIM), "o": (HIDDEN, HIDDEN),
        "gate_up": (HIDDEN, 2 * INTER), "down": (INTER, HIDDEN)}


def timed(fn, reps: int = 20) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps / 1e3


def main() -> None:
    out_path = sys.argv[1]
    gpu = sys.argv[2] if len(sys.argv) > 2 else "H100"
    peak_flops, peak_bw = PEAK[gpu]
    dev = "cuda"
    weights = {k: torch.randn(i, o, device=dev, dtype=torch.bfloat16) * 0.02 for k, (i, o) in MATS.items()}
    result = {"gpu": gpu, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "prefill": [], "decode": [], "attention_decode": [], "attention_prefill": []}
    params = sum(i * o for i, o in MATS.values())
    for tokens in (128, 512, 2048, 8192):
        x = torch.randn(tokens, HIDDEN, device=dev, dtype=torch.bfloat16)
        xs = {k: (x if i == HIDDEN else torch.randn(tokens, i, device=dev, dtype=torch.bfloat16))
              for k, (i, _) in MATS.items()}
        t = timed(lambda xs=xs: [xs[k] @ w for k, w in weights.items()])
        flops = 2 * params * tokens
        result["prefill"].append({"tokens": tokens, "s": t, "tflops": flops / t / 1e12, "mfu": flops / t / peak_flops})
    for batch in (1, 8, 32, 64):
        xs = {k: torch.randn(batch, i, device=dev, dtype=torch.bfloat16) for k, (i, _) in MATS.items()}
        t = timed(lambda xs=xs: [xs[k] @ w for k, w in weights.items()], reps=50)
        nbytes = 2 * params
        result["decode"].append({"batch": batch, "s": t, "gbps": nbytes / t / 1e9, "mbu": nbytes / t / peak_bw})
    for batch, ctx in ((1, 4096), (16, 4096), (64, 2048)):
        q = torch.randn(batch, HEADS, 1, HEAD_DIM, device=dev, dtype=torch.bfloat16)
        k = torch.randn(batch, HEADS, ctx, HEAD_DIM, device=dev, dtype=torch.bfloat16)
        v = torch.randn_like(k)
        t = timed(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v), reps=50)
        nbytes = 2 * batch * KV_HEADS * ctx * HEAD_DIM * 2  # GQA: the real cache holds KV_HEADS
        result["attention_decode"].append({"batch": batch, "ctx": ctx, "s": t,
                                           "kv_gbps_equiv": nbytes / t / 1e9})
    for seq in (2048, 8192):
        q = torch.randn(1, HEADS, seq, HEAD_DIM, device=dev, dtype=torch.bfloat16)
        k, v = torch.randn_like(q), torch.randn_like(q)
        t = timed(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        flops = 4 * HEADS * HEAD_DIM * seq * seq / 2
        result["attention_prefill"].append({"seq": seq, "s": t, "tflops": flops / t / 1e12,
                                            "mfu": flops / t / peak_flops})
    # a whole decode step of the 8B model at batch 1 / 32 by the layer products above
    result["summary"] = {
        "prefill_mfu_2048": result["prefill"][2]["mfu"],
        "decode_mbu_batch1": result["decode"][0]["mbu"],
        "decode_mbu_batch32": result["decode"][2]["mbu"],
        "layers": LAYERS,
    }
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result["summary"], indent=2))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
