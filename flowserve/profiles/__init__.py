"""Hardware and model catalogs, cost models and output-length prediction."""

from flowserve.profiles.cost_model import CostModel, RooflineCostModel, cost_model_for
from flowserve.profiles.hardware import GPU, get_gpu
from flowserve.profiles.models import ModelSpec, get_model
from flowserve.profiles.predictor import OutputPredictor

__all__ = [
    "GPU",
    "CostModel",
    "ModelSpec",
    "OutputPredictor",
    "RooflineCostModel",
    "cost_model_for",
    "get_gpu",
    "get_model",
]
