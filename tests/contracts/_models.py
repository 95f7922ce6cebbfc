"""The estimators the contracts run over, and small fitted instances of them shared by the
contract modules (each configuration is fitted once per test session).

The estimator classes are read from the model-family registry (``FAMILIES``), never listed
here; ``test_every_public_estimator_is_a_registered_family`` checks that every scikit-learn
estimator in ``gpexplain.models.__all__`` has a family. Small settings are keyed by *parameter name*
(``SMALL_SETTINGS``), so a new estimator whose parameters are named like the others' is made
small without an entry here.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest
import sklearn.base

import gpexplain.models
from gpexplain.models.families import FAMILIES


def public_estimator_classes() -> tuple[type, ...]:
    """Every class in ``gpexplain.models.__all__`` that subclasses scikit-learn's BaseEstimator."""
    classes = (getattr(gpexplain.models, name) for name in gpexplain.models.__all__)
    return tuple(
        cls for cls in classes
        if isinstance(cls, type) and issubclass(cls, sklearn.base.BaseEstimator)
    )


ESTIMATOR_CLASSES = tuple(dict.fromkeys(family.estimator for _, family in FAMILIES.items()))

# Fast settings for the small data below, applied to every estimator that has the parameter.
SMALL_SETTINGS = {
    "n_restarts": 0,
    "max_iter": 15,
    "n_inducing": 8,
    "n_epochs": 5,
    "batch_size": 32,
    "n_frequencies": 30,
}

# Configurations that change what kind of posterior an estimator builds; the contracts over
# posteriors and methods run them beside each estimator's small default.
VARIANTS = {
    "RandomFeatureGPRegressor(n_models=2)": ("RandomFeatureGPRegressor", {"n_models": 2}),
}

N_ROWS = 30
N_FEATURES = 2


def is_classifier(cls) -> bool:
    """True for a classifier class (scikit-learn's estimator-type tag)."""
    return sklearn.base.is_classifier(cls())


def small(cls, **settings):
    """An unfitted ``cls`` with the small settings its parameters accept, then ``settings``."""
    parameters = inspect.signature(cls).parameters
    chosen = {name: value for name, value in SMALL_SETTINGS.items() if name in parameters}
    return cls(**{**chosen, **settings})


def regression_data(n_rows: int = N_ROWS, n_features: int = N_FEATURES, seed: int = 0):
    """A smooth target with noise: ``X`` (n_rows, n_features), ``y`` (n_rows,)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    y = np.sin(1.5 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n_rows)
    return X, y


def classification_data(n_classes: int = 2, n_rows: int = 40, seed: int = 0):
    """Classes 0..n_classes-1 by quantiles of a linear score (every class present)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, N_FEATURES))
    score = X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n_rows)
    cuts = np.quantile(score, np.linspace(0.0, 1.0, n_classes + 1)[1:-1])
    return X, np.digitize(score, cuts)


def training_data(cls, n_classes: int = 2):
    """``(X, y)`` for ``cls``'s task."""
    return classification_data(n_classes) if is_classifier(cls) else regression_data()


@functools.cache
def _fitted(cls, settings: tuple, n_classes: int):
    X, y = training_data(cls, n_classes)
    return small(cls, **dict(settings)).fit(X, y)


def fitted(cls, n_classes: int = 2, **settings):
    """``small(cls, **settings)`` fitted on ``training_data`` (cached: do not modify it)."""
    return _fitted(cls, tuple(sorted(settings.items())), n_classes)


def model_configurations() -> dict[str, tuple[type, dict]]:
    """``{id: (estimator class, settings)}``: each estimator's small default and ``VARIANTS``."""
    by_name = {cls.__name__: cls for cls in ESTIMATOR_CLASSES}
    configurations = {cls.__name__: (cls, {}) for cls in ESTIMATOR_CLASSES}
    for name, (class_name, settings) in VARIANTS.items():
        configurations[name] = (by_name[class_name], settings)
    return configurations


def posterior_kernels(posterior) -> list:
    """The kernel of a posterior, or its components' kernels (a mixture)."""
    components = getattr(posterior, "components", None)
    if components is not None:
        return [component.kernel for component in components]
    return [posterior.kernel]


def cases(names, test: str, known_defects: dict):
    """``pytest.param`` per case name, ``xfail(strict=True)`` where ``known_defects`` lists
    ``(test, name)`` with its reason (so the mark flips when the defect is fixed)."""
    params = []
    for name in names:
        reason = known_defects.get((test, name))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(name, id=name, marks=marks))
    return params
