"""The cluster YAML's prefill/decode disaggregation: an instance's `kv_transfer:` entry and
the cluster's `links:` between instances or groups (an entry's name stands for all its
`count` instances).

```yaml
instances:
  - {name: p, gpu: H100, model: llama-3.1-8b, role: prefill, count: 2, kv_transfer: {layerwise: true}}
  - {name: d, gpu: A100-80G, model: llama-3.1-8b, role: decode, count: 4}
links:
  - {between: [p, d], interconnect: infiniband}                    # every p-i with every d-j
  - {between: [p-0, d-3], interconnect: roce, bandwidth_gbps: 800}  # an instance pair: wins over a group's
default_link: ethernet          # pairs without a link (the default)
```

Errors name what is wrong: a link naming an unknown instance or group, a decode instance
whose model no prefill-capable instance serves. No driver schedules the roles yet: the
core refuses a `prefill` instance when a cluster runs (`flowserve.core._instances`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Annotated

from pydantic import Field, model_validator

from flowserve.errors import ConfigError
from flowserve.profiles.links import DEFAULT_LINK_CLASS, LinkClass, link_class
from flowserve.schema import Strict, at_most
from flowserve.types.specs import InstanceSpec, KVTransfer, Link, PDProtocol


class KVTransferConfig(Strict):
    """How an instance's engine moves KV in disaggregated serving."""

    protocol: PDProtocol = Field("vllm", description="the engines' P/D protocol: `vllm` (a prefill request with "
                                 "`kv_transfer_params`, whose answer's parameters go with the request to the decode "
                                 "instance) or `sglang` (bootstrap host, port and room on both requests)")
    bootstrap_port: int | None = Field(None, ge=1, le=65535, description="SGLang: a prefill instance's "
                                       "`--disaggregation-bootstrap-port` (SGLang's default is 8998)")
    layerwise: bool = Field(False, description="the engine sends each layer's KV as the prefill computes it "
                            "(Mooncake, LMCache's layer-wise mode), so the transfer overlaps the prefill; vLLM's "
                            "NIXL connector sends after it")


class LinkConfig(Strict):
    """The interconnect between two instances or groups (an entry's name with `count`)."""

    between: list[str] = Field(min_length=2, max_length=2, description="two instance names or instance entries' "
                               "names (a group: each of its instances)")
    interconnect: LinkClass = Field(description="nvlink, infiniband, roce or ethernet: the defaults of its figures "
                                    "(checked, not yet scheduled)")
    bandwidth_gbps: Annotated[float, Field(gt=0), at_most(1e6, "beyond any interconnect")] | None = Field(
        None, description="line rate, Gbit/s (default: the class's)")
    latency_us: Annotated[float, Field(ge=0), at_most(1e6, "a second")] | None = Field(
        None, description="fixed latency per transfer, µs (default: the class's)")
    efficiency: float | None = Field(None, gt=0, le=1, description="share of the line rate a transfer reaches "
                                     "(default: the class's)")

    @model_validator(mode="after")
    def _two(self) -> LinkConfig:
        if self.between[0] == self.between[1]:
            raise ValueError(f"a link joins two different instances or groups, got {self.between[0]!r} twice")
        return self

    def link(self) -> Link:
        return link_class(self.interconnect, self.bandwidth_gbps, self.latency_us, self.efficiency)


def with_links(specs: Sequence[InstanceSpec], groups: dict[str, list[str]], links: Sequence[LinkConfig],
               default: LinkClass = DEFAULT_LINK_CLASS) -> list[InstanceSpec]:
    """Each spec with its links (to the instances the cluster's `links:` join it with; a
    link between two instances wins over one between their groups) and the default link.
    `groups`: an entry's name → its instances' names."""
    names = {s.name for s in specs}
    pairs: dict[tuple[str, str], tuple[int, Link]] = {}  # (a, b) → (1 for an instance pair, 0 for a group's, link)
    for k, cfg in enumerate(links):
        ends = []
        for end in cfg.between:
            if end in names:
                ends.append([end])
            elif end in groups:
                ends.append(groups[end])
            else:
                raise ConfigError(f"cluster: links[{k}] names {end!r}, which is no instance or instance entry "
                                  f"(instances: {', '.join(sorted(names)[:8])}{', ...' if len(names) > 8 else ''})")
        exact = int(all(end in names for end in cfg.between))
        for a in ends[0]:
            for b in ends[1]:
                key = (min(a, b), max(a, b))
                if key[0] != key[1] and pairs.get(key, (-1,))[0] <= exact:
                    pairs[key] = (exact, cfg.link())
    default_link = link_class(default)
    own: dict[str, list[tuple[str, Link]]] = {}
    for (a, b), (_, link) in sorted(pairs.items()):
        own.setdefault(a, []).append((b, link))
    return [dataclasses.replace(s, kv_transfer=dataclasses.replace(
        s.kv_transfer, links=tuple(own.get(s.name, ())), default_link=default_link)) for s in specs]


def check_roles(specs: Sequence[InstanceSpec]) -> None:
    """Every decode instance needs an instance that may prefill for it (role prefill or
    both) serving its model, and every prefill instance one that decodes: one line naming
    the instance, its model and the instances of the other role."""
    llm = [s for s in specs if s.kind == "llm"]
    for s in llm:
        if s.role == "decode" and not any(p.prefills and p.model.lower() == s.model.lower() for p in llm):
            others = [f"{p.name} ({p.model})" for p in llm if p.role == "prefill"]
            raise ConfigError(f"cluster: decode instance {s.name!r} serves {s.model}, but no instance with role "
                              f"prefill or both serves {s.model}"
                              + (f" (the prefill instances serve other models: {', '.join(others[:4])})" if others
                                 else ""))
        if s.role == "prefill" and not any(d.decodes and d.model.lower() == s.model.lower() for d in llm):
            raise ConfigError(f"cluster: prefill instance {s.name!r} serves {s.model}, but no instance with role "
                              f"decode or both serves {s.model}: its prefills would have no decode instance")


def transfer_spec(cfg: KVTransferConfig | None) -> KVTransfer:
    if cfg is None:
        return KVTransfer()
    return KVTransfer(cfg.protocol, cfg.bootstrap_port, cfg.layerwise)
