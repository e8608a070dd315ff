"""What the scheduler core knows of an instance's hardware: its cost model, context and
KV capacity, derived from the instance spec (fitted profile, declared architecture or
the GPU and model catalogs)."""

from __future__ import annotations

from dataclasses import dataclass

from flowserve.profiles.cost_model import CostModel, RooflineCostModel, kv_capacity_tokens
from flowserve.profiles.hardware import get_gpu
from flowserve.profiles.models import ModelSpec, get_model
from flowserve.types.specs import InstanceSpec


@dataclass(frozen=True, slots=True)
class InstanceProfile:
    cost: CostModel
    max_context: int | None
    kv_capacity: int | None = None  # KV cache tokens, where known


def model_of(spec: InstanceSpec) -> ModelSpec:
    """The instance's declared architecture, else the catalog's."""
    return spec.model_spec if spec.model_spec is not None else get_model(spec.model)


def roofline_for(spec: InstanceSpec) -> CostModel:
    """The instance's cost model: its fitted profile if it has one, else the roofline."""
    if spec.profile is not None:
        return spec.profile
    return RooflineCostModel(get_gpu(spec.gpu), model_of(spec), spec.tp)


def max_context(spec: InstanceSpec) -> int:
    """The longest sequence the instance holds: the model's context, or its KV cache where
    that holds fewer tokens (vLLM then requires --max-model-len ≤ the KV tokens)."""
    if spec.profile is not None:
        return spec.profile.max_context
    return max(1, min(model_of(spec).max_context, kv_capacity(spec) - kv_capacity(spec) % spec.engine.block_size))


def kv_capacity(spec: InstanceSpec) -> int:
    if spec.profile is not None:
        return spec.profile.kv_capacity_tokens
    return kv_capacity_tokens(get_gpu(spec.gpu), model_of(spec), spec.tp, spec.engine.gpu_memory_utilization)


def instance_profile(spec: InstanceSpec) -> InstanceProfile:
    return InstanceProfile(roofline_for(spec), max_context(spec), kv_capacity(spec))
