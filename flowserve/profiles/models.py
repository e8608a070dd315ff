"""Model catalog: the architecture numbers the roofline cost model needs."""

from __future__ import annotations

from dataclasses import dataclass

from flowserve.errors import ConfigError


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    params_b: float  # billions of parameters
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    max_context: int
    dtype_bytes: int = 2

    @property
    def weight_bytes(self) -> float:
        return self.params_b * 1e9 * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V for every layer: 2 · layers · kv_heads · head_dim · dtype."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @property
    def attn_dim(self) -> int:
        return self.heads * self.head_dim


MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("llama-2-7b", 6.74, 32, 4096, 32, 32, 128, 4096),
        ModelSpec("llama-2-13b", 13.0, 40, 5120, 40, 40, 128, 4096),
        ModelSpec("llama-3.1-8b", 8.03, 32, 4096, 32, 8, 128, 131072),
        ModelSpec("llama-3.1-70b", 70.6, 80, 8192, 64, 8, 128, 131072),
        ModelSpec("llama-3-70b", 70.6, 80, 8192, 64, 8, 128, 8192),
        ModelSpec("mistral-7b", 7.24, 32, 4096, 32, 8, 128, 32768),
    )
}


def get_model(name: str) -> ModelSpec:
    try:
        return MODELS[name.lower()]
    except KeyError:
        raise ConfigError(f"unknown model {name!r}; known models: {', '.join(MODELS)}") from None
