"""Explanations: linear functionals of the GP posterior, returned as ``Attribution`` objects."""

from gpexplain.explain.acquisition import explain_acquisition
from gpexplain.explain.global_importance import global_importance
from gpexplain.explain.gpx import gpx_explanation
from gpexplain.explain.gradients import gradients
from gpexplain.explain.integrated_gradients import integrated_gradients
from gpexplain.explain.interactions import shapley_interactions
from gpexplain.explain.sensitivity import global_sensitivity
from gpexplain.explain.shapley import global_shapley_values, shapley_values
from gpexplain.explain.variance import explain_variance

__all__ = [
    "explain_acquisition", "explain_variance", "global_importance", "global_sensitivity",
    "global_shapley_values", "gpx_explanation", "gradients", "integrated_gradients",
    "shapley_interactions", "shapley_values",
]
