"""Interconnects between instances, and what a KV transfer over one costs.

A disaggregated call's prompt KV goes from its prefill instance to its decode instance
over the link between them (`links:` in the cluster YAML; the cluster's `default_link`
class otherwise). Each interconnect class has defaults, each from a public figure:

| class | line rate | efficiency | latency | source |
|---|---|---|---|---|
| `nvlink` | 300 GB/s | 0.8 | 3 µs | A100 datasheet: NVLink 3, 600 GB/s both ways; NCCL ~0.8 |
| `infiniband` | 400 Gb/s | 0.9 | 2 µs | one NDR port (ConnectX-7); RDMA ~0.9 of line rate |
| `roce` | 200 Gb/s | 0.9 | 5 µs | one 200 GbE RoCE NIC, as in Mooncake's testbed |
| `ethernet` | 25 Gb/s | 0.36 | 50 µs | DistServe's cross-node 25 Gbps; TCP 1/2.4 of RDMA (Mooncake) |

The transfer model is checked against Mooncake's published measurement (its Transfer
Engine README: 40 GB, the KV of 128k tokens of LLaMA3-70B, moved at 87 GB/s over 4×200
Gbps RoCE): `kv_transfer_s` predicts 0.48 s for those bytes over that link, the
measurement is 0.46 s (`tests/profiles/test_links.py`).
"""

from __future__ import annotations

from typing import Literal

from flowserve.profiles.models import ModelSpec
from flowserve.types.specs import InstanceSpec, Link

LinkClass = Literal["nvlink", "infiniband", "roce", "ethernet"]

LINK_CLASSES: dict[str, Link] = {
    "nvlink": Link("nvlink", 300e9, 0.8, 3e-6),
    "infiniband": Link("infiniband", 400e9 / 8, 0.9, 2e-6),
    "roce": Link("roce", 200e9 / 8, 0.9, 5e-6),
    "ethernet": Link("ethernet", 25e9 / 8, 0.36, 50e-6),
}
DEFAULT_LINK_CLASS: LinkClass = "ethernet"  # undeclared pairs: the cautious guess


def link_class(name: str, bandwidth_gbps: float | None = None, latency_us: float | None = None,
               efficiency: float | None = None) -> Link:
    """A class's link, with any of its figures replaced (Gbit/s line rate, µs)."""
    base = LINK_CLASSES[name]
    return Link(name, base.bandwidth_bytes_s if bandwidth_gbps is None else bandwidth_gbps * 1e9 / 8,
                base.efficiency if efficiency is None else efficiency,
                base.latency_s if latency_us is None else latency_us / 1e6)


def link_between(a: InstanceSpec, b: InstanceSpec) -> Link:
    """The link a KV transfer from `a` to `b` takes: declared on either side, else a's default."""
    for spec, peer in ((a, b.name), (b, a.name)):
        for name, link in spec.kv_transfer.links:
            if name == peer:
                return link
    return a.kv_transfer.default_link or LINK_CLASSES[DEFAULT_LINK_CLASS]


def kv_bytes(tokens: int, model: ModelSpec) -> float:
    """Bytes of KV cache of `tokens` tokens: K and V of every layer and KV head,
    2 · layers · kv_heads · head_dim · dtype bytes per token."""
    return max(tokens, 0) * model.kv_bytes_per_token


def kv_transfer_s(tokens: int, model: ModelSpec, link: Link) -> float:
    """Seconds to move the KV of `tokens` tokens over `link`: latency + bytes / (line rate ·
    efficiency). 0 for nothing to move."""
    if tokens <= 0:
        return 0.0
    return link.latency_s + kv_bytes(tokens, model) / link.effective_bytes_s


def exposed_transfer_s(transfer_s: float, prefill_s: float, layers: int, layerwise: bool) -> float:
    """Seconds the transfer adds after the prefill ends. Sent after the prefill (vLLM's
    NIXL connector): all of it. Sent layer by layer as the prefill computes them (Mooncake,
    LMCache's layer-wise mode): layer i's KV exists at prefill_s · i / L and takes
    transfer_s / L on the link, so the last layer lands at
    max(prefill_s + transfer_s / L, prefill_s / L + transfer_s), i.e. after the prefill:
    max(transfer_s / L, transfer_s − prefill_s · (L − 1) / L)."""
    if transfer_s <= 0.0:
        return 0.0
    if not layerwise or layers <= 1:
        return transfer_s
    return max(transfer_s / layers, transfer_s - prefill_s * (layers - 1) / layers)
