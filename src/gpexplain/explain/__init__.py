"""Explanations: linear functionals of the GP posterior, returned as ``Attribution`` objects."""

from gpexplain.explain.integrated_gradients import integrated_gradients

__all__ = ["integrated_gradients"]
