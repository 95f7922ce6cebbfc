"""The contract every estimator satisfies, after scikit-learn's ``utils/estimator_checks.py``.

Run over ``ESTIMATOR_CLASSES`` (``tests/contracts/_models.py``: the estimator of every entry of
``FAMILIES``, ``GPClassifier`` included), so a new estimator is checked the moment
it is registered (and an exported estimator without a family fails):

* fit: fitted attributes end in ``_`` and the constructor parameters are left alone,
  ``feature_names_in_`` and ``n_features_in_``, finite predictions of the right shape
  (classifiers: labels from ``classes_``, probabilities summing to one), ``get_params`` /
  ``set_params`` / ``sklearn.base.clone`` round trips, progress reported only through the
  keyword-only ``callback``;
* parameters: every entry of ``_parameter_constraints`` refuses every value its constraint's
  ``invalid_values()`` lists, with an ``InvalidParameterError`` naming the parameter (the
  cases are generated from the constraints, not kept by hand), and accepts the default;
* persistence: ``gx.save`` then ``gx.load`` predicts bit-identically (``np.array_equal``);
* classifiers: ``predict_proba(X)[:, c]`` equals the ``prediction`` of the probability-level
  integrated gradients for class c to 1e-10 (both are ``E[p_c(f(x))]`` of one posterior).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import sklearn.base

import gpexplain as gx
from gpexplain.models import _params
from gpexplain.models._params import InvalidParameterError
from tests.contracts._models import (
    ESTIMATOR_CLASSES,
    fitted,
    is_classifier,
    public_estimator_classes,
    regression_data,
    small,
    training_data,
)

CLASSIFIERS = [cls for cls in ESTIMATOR_CLASSES if is_classifier(cls)]
REGRESSORS = [cls for cls in ESTIMATOR_CLASSES if not is_classifier(cls)]


def _ids(classes):
    return [cls.__name__ for cls in classes]


def _constraint_classes():
    """Every constraint class of ``_params`` (a class with a ``check(name, value)`` method)."""
    return [
        value for value in vars(_params).values()
        if isinstance(value, type) and value.__module__ == _params.__name__
        and callable(getattr(value, "check", None))
    ]


def _parameter_cases():
    cases = []
    for cls in ESTIMATOR_CLASSES:
        for name, constraint in cls._parameter_constraints.items():
            for value in constraint.invalid_values():
                cases.append(pytest.param(cls, name, value, id=f"{cls.__name__}-{name}={value!r}"))
    return cases


def test_there_are_estimators_of_both_tasks():
    assert "GPClassifier" in _ids(CLASSIFIERS)
    assert "GPRegressor" in _ids(REGRESSORS)


# -- fit -----------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES, ids=_ids(ESTIMATOR_CLASSES))
def test_fit_contract(cls):
    model = small(cls)
    params_before = {name: repr(value) for name, value in model.get_params().items()}
    X, y = training_data(cls)
    assert model.fit(X, y) is model
    # fit leaves the constructor parameters alone and adds only trailing-underscore attributes
    assert {name: repr(value) for name, value in model.get_params().items()} == params_before
    added = set(vars(model)) - set(params_before)
    assert added, "fit added no fitted attributes"
    assert all(name.endswith("_") for name in added), sorted(added)
    assert model.n_features_in_ == X.shape[1]
    assert model.feature_names_in_ == [f"x{j}" for j in range(X.shape[1])]
    prediction = model.predict(X[:7])
    assert prediction.shape == (7,)
    if is_classifier(cls):
        assert set(np.unique(prediction)) <= set(model.classes_)
        np.testing.assert_array_equal(model.classes_, np.unique(y))
        proba = model.predict_proba(X[:7])
        assert proba.shape == (7, len(model.classes_))
        assert np.all(np.isfinite(proba)) and np.all((proba >= 0) & (proba <= 1))
        np.testing.assert_allclose(proba.sum(1), 1.0, rtol=0, atol=1e-12)
    else:
        assert np.all(np.isfinite(prediction))
        mean, std = model.predict(X[:7], return_std=True)
        np.testing.assert_array_equal(mean, prediction)
        assert std.shape == (7,) and np.all(np.isfinite(std)) and np.all(std >= 0)


def test_fit_records_dataframe_column_names():
    pd = pytest.importorskip("pandas")
    X, y = regression_data()
    frame = pd.DataFrame(X, columns=["height", "weight"])
    for cls in REGRESSORS:
        model = fitted(cls)  # the NumPy fit: names x0, x1
        named = small(cls).fit(frame, y)
        assert named.feature_names_in_ == ["height", "weight"], cls.__name__
        assert named.n_features_in_ == 2
        np.testing.assert_allclose(named.predict(frame[:5]), model.predict(X[:5]), rtol=1e-8)


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES, ids=_ids(ESTIMATOR_CLASSES))
def test_params_round_trip_through_clone_and_set_params(cls):
    model = small(cls)
    params = model.get_params()
    init = [
        name for name, parameter in inspect.signature(cls).parameters.items()
        if parameter.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    assert sorted(params) == sorted(init), "get_params must list exactly the constructor's"
    clone = sklearn.base.clone(model)
    assert type(clone) is cls and clone is not model
    assert {k: repr(v) for k, v in clone.get_params().items()} == {
        k: repr(v) for k, v in params.items()
    }
    fresh = cls()
    assert fresh.set_params(**params) is fresh
    assert {k: repr(v) for k, v in fresh.get_params().items()} == {
        k: repr(v) for k, v in params.items()
    }
    with pytest.raises(ValueError):
        fresh.set_params(no_such_parameter=1)
    # a clone of a fitted model is unfitted
    refit = sklearn.base.clone(fitted(cls))
    assert not any(name.endswith("_") and not name.startswith("_") for name in vars(refit))


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES, ids=_ids(ESTIMATOR_CLASSES))
def test_callback_is_keyword_only_and_reports_progress(cls, capsys):
    model = small(cls)
    parameter = inspect.signature(model.fit).parameters["callback"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is None
    calls = []
    model.fit(*training_data(cls), callback=lambda step, total: calls.append((step, total)))
    assert calls, "the optimiser ran but never reported progress"
    steps = [step for step, _ in calls]
    assert all(0 < step <= total for step, total in calls)
    assert steps == sorted(steps)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""  # nothing displayed by the estimator


# -- parameters, generated from the declared constraints ------------------------------------
def test_every_constraint_class_lists_invalid_values():
    classes = _constraint_classes()
    assert len(classes) >= 5, classes
    for constraint_class in classes:
        assert callable(getattr(constraint_class, "invalid_values", None)), constraint_class
        assert constraint_class.invalid_values.__doc__, constraint_class


def test_invalid_values_of_an_integer_constraint():
    assert _params.Integer(minimum=1).invalid_values()[:4] == (0, 2.5, True, "1")


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES, ids=_ids(ESTIMATOR_CLASSES))
def test_constraints_name_constructor_parameters_and_accept_the_defaults(cls):
    defaults = {
        name: parameter.default for name, parameter in inspect.signature(cls).parameters.items()
    }
    assert cls._parameter_constraints, f"{cls.__name__} declares no parameter constraints"
    for name, constraint in cls._parameter_constraints.items():
        assert name in defaults, f"{cls.__name__} constrains {name!r}, not a parameter"
        constraint.check(name, defaults[name])  # the default must pass its own constraint
        assert constraint.invalid_values(), (cls.__name__, name)


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES, ids=_ids(ESTIMATOR_CLASSES))
def test_every_estimator_constrains_its_seed(cls):
    assert isinstance(cls._parameter_constraints.get("random_state"), _params.Seed)
    if not is_classifier(cls):
        assert isinstance(cls._parameter_constraints.get("noise"), _params.Variance)


@pytest.mark.parametrize("cls, name, value", _parameter_cases())
def test_invalid_value_is_refused_by_name(cls, name, value):
    X, y = training_data(cls)
    with pytest.raises(InvalidParameterError, match=rf"\b{name}\b") as raised:
        small(cls, **{name: value}).fit(X, y)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, TypeError)


def test_numpy_integers_are_accepted():
    X, y = regression_data(12)
    model = gx.GPRegressor(n_restarts=np.int64(0), max_iter=np.int32(3),
                           random_state=np.int64(2)).fit(X, y)
    assert model.feature_names_in_ == ["x0", "x1"] and model.n_features_in_ == 2


# -- persistence ---------------------------------------------------------------------------
@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES, ids=_ids(ESTIMATOR_CLASSES))
def test_save_then_load_predicts_bit_identically(cls, tmp_path):
    model = fitted(cls)
    X, _ = training_data(cls)
    query = np.vstack([X[:5], X[:5] * 1.3 + 0.2])
    gx.save(model, tmp_path / "model")
    loaded = gx.load(tmp_path / "model")
    assert type(loaded) is cls
    assert loaded.feature_names_in_ == model.feature_names_in_
    np.testing.assert_array_equal(loaded.predict(query), model.predict(query))
    if is_classifier(cls):
        np.testing.assert_array_equal(loaded.predict_proba(query), model.predict_proba(query))
        np.testing.assert_array_equal(loaded.classes_, model.classes_)
    else:
        for got, expected in zip(loaded.predict(query, return_std=True),
                                 model.predict(query, return_std=True), strict=True):
            np.testing.assert_array_equal(got, expected)


# -- classifiers: predict_proba is the explanation's prediction -----------------------------
# The classifier's fit, ``predict_proba`` and the explanations share one implementation of the
# link expectations (gpexplain.links); before, a 4-class model's two differed by ~5e-4 here.
PROBABILITY_CASES = [pytest.param(cls, n_classes, id=f"{cls.__name__}-{n_classes}-classes")
                     for cls in CLASSIFIERS for n_classes in (2, 3, 4)]


@pytest.mark.parametrize("cls, n_classes", PROBABILITY_CASES)
def test_predict_proba_equals_the_probability_explanations_prediction(cls, n_classes):
    model = fitted(cls, n_classes=n_classes)
    X, _ = training_data(cls, n_classes)
    query = X[:6]
    proba = model.predict_proba(query)
    assert proba.shape == (6, n_classes)
    for c, label in enumerate(model.classes_):
        result = gx.integrated_gradients(
            model, query, output="probability", target_class=label, return_cov=False
        )
        np.testing.assert_allclose(result.prediction, proba[:, c], rtol=0, atol=1e-10,
                                   err_msg=f"class {label!r}")


def test_every_public_estimator_is_a_registered_family():
    assert set(public_estimator_classes()) == set(ESTIMATOR_CLASSES)
