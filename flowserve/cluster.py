"""Building a cluster: instance specs, their cost models, built-in cluster layouts."""

from __future__ import annotations

from flowserve.core import InstanceProfile
from flowserve.profiles.cost_model import CostModel, RooflineCostModel, kv_capacity_tokens
from flowserve.profiles.hardware import get_gpu
from flowserve.profiles.models import ModelSpec, get_model
from flowserve.types import EngineParams, InstanceSpec


def model_of(spec: InstanceSpec) -> ModelSpec:
    """The instance's declared architecture, else the catalog's."""
    return spec.model_spec if spec.model_spec is not None else get_model(spec.model)


def roofline_for(spec: InstanceSpec) -> CostModel:
    """The instance's cost model: its fitted profile if it has one, else the roofline."""
    if spec.profile is not None:
        return spec.profile
    return RooflineCostModel(get_gpu(spec.gpu), model_of(spec), spec.tp)


def max_context(spec: InstanceSpec) -> int:
    return spec.profile.max_context if spec.profile is not None else model_of(spec).max_context


def instance_profile(spec: InstanceSpec) -> InstanceProfile:
    return InstanceProfile(roofline_for(spec), max_context(spec), kv_capacity(spec))


def kv_capacity(spec: InstanceSpec) -> int:
    if spec.profile is not None:
        return spec.profile.kv_capacity_tokens
    return kv_capacity_tokens(get_gpu(spec.gpu), model_of(spec), spec.tp, spec.engine.gpu_memory_utilization)


def _instances(model: str, tp: int, layout: list[tuple[str, str]],
               engine: EngineParams | None = None) -> tuple[InstanceSpec, ...]:
    eng = engine or EngineParams()
    return tuple(InstanceSpec(name, gpu, model, tp, engine=eng) for name, gpu in layout)


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
}
