"""GPU catalog: dense bf16 tensor throughput, memory bandwidth and size, TP interconnect.

Figures are the vendors' datasheet numbers for dense (non-sparse) bf16; `link_gbps` is
the per-GPU one-direction bandwidth a tensor-parallel all-reduce sees (NVLink for SXM
parts, PCIe 4.0/5.0 x16 for the PCIe workstation/inference cards).
"""

from __future__ import annotations

from dataclasses import dataclass

from flowserve.errors import ConfigError


@dataclass(frozen=True, slots=True)
class GPU:
    name: str
    tflops: float  # peak dense bf16 TFLOP/s
    hbm_gbps: float  # memory bandwidth, GB/s
    memory_gib: float
    link_gbps: float  # TP all-reduce bandwidth per GPU, GB/s
    link_latency_us: float  # per all-reduce fixed cost


GPUS: dict[str, GPU] = {
    g.name.lower(): g
    for g in (
        GPU("A100-80G", 312.0, 2039.0, 80.0, 300.0, 8.0),
        GPU("A6000", 154.8, 768.0, 48.0, 25.0, 25.0),
        # GeForce: 71 dense fp16 TFLOP/s with fp32 accumulation (what PyTorch runs)
        GPU("RTX3090", 71.0, 936.0, 24.0, 25.0, 25.0),
        GPU("L40", 181.0, 864.0, 48.0, 25.0, 25.0),
        GPU("L40S", 362.0, 864.0, 48.0, 25.0, 25.0),
        GPU("L4", 121.0, 300.0, 24.0, 25.0, 25.0),
        GPU("H100", 989.0, 3350.0, 80.0, 450.0, 6.0),
        GPU("H200", 989.0, 4800.0, 141.0, 450.0, 6.0),
    )
}


def get_gpu(name: str) -> GPU:
    try:
        return GPUS[name.lower()]
    except KeyError:
        known = ", ".join(g.name for g in GPUS.values())
        raise ConfigError(f"unknown GPU {name!r}; known GPUs: {known}") from None
