"""Estimators: scikit-learn style fit/predict over GPyTorch; each builds a posterior."""

from gpexplain.models._fitting import FitError
from gpexplain.models.additive_gp_regressor import AdditiveGPRegressor
from gpexplain.models.gp_classifier import GPClassifier
from gpexplain.models.gp_regressor import GPRegressor
from gpexplain.models.gpx_regressor import GPXRegressor
from gpexplain.models.random_feature_gp_regressor import RandomFeatureGPRegressor
from gpexplain.models.sparse_gp_regressor import SparseGPRegressor

__all__ = [
    "AdditiveGPRegressor",
    "FitError",
    "GPClassifier",
    "GPRegressor",
    "GPXRegressor",
    "RandomFeatureGPRegressor",
    "SparseGPRegressor",
]
