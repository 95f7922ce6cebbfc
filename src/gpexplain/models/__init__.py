"""Estimators: scikit-learn style fit/predict over GPyTorch; each builds a posterior."""

from gpexplain.models.gp_regressor import FitError, GPRegressor

__all__ = ["FitError", "GPRegressor"]
