"""The method x model-family matrix, after captum's ``tests/attr/helpers/test_config.py``: one
table (the ``METHODS`` registry crossed with every estimator) drives the checks.

For every explanation method and every small fitted estimator (``tests/contracts/_models.py``,
plus the configurations that build another kind of posterior), the method either

* runs end to end: a local method returns an ``Attribution`` (a ``ShapleyInteractions``
  with ``n_features + n_features (n_features - 1) / 2`` values where it declares
  ``outputs="interactions"``) whose mean (n_points, n_features) and covariance (n_points,
  n_features, n_features) are finite and of the right shapes, and, where the registry
  declares it ``complete``, ``mean.sum(1)`` equals
  ``prediction - baseline_prediction`` (and ``1^T cov 1`` the variance of that difference) to
  1e-8 of the scale; a global method returns finite per-feature results; or
* is refused with a ``TypeError``/``ValueError`` whose message names something the method does
  apply to (an estimator or a kernel class on which it ran in this matrix).

Which cells run is found by trying, not declared here. For classifiers, each level a method
declares (``latent``, ``probability``) runs through ``output=`` (complete where declared) and
each level it does not declare is refused with a message naming a method that offers it.
Every method cites at least one publication (authors, title, year), is exported as
``gx.<function name>`` and shown in README.md, and every command-line name is listed under
README's ``--method``, has its command-line arguments (``gpexplain.cli.methods.ARGUMENTS``) and
a model family that offers it (so ``gpexplain explain`` reaches it), and the command writes its
references into ``summary.json``, which the HTML report cites (tests/test_report.py).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pytest

import gpexplain as gx
from gpexplain.attribution import Attribution
from gpexplain.cli.methods import ARGUMENTS, method_id
from gpexplain.explain.methods import LEVELS, METHODS
from gpexplain.interactions import ShapleyInteractions
from gpexplain.models.families import FAMILIES
from tests.contracts._models import (
    fitted,
    is_classifier,
    model_configurations,
    posterior_kernels,
    training_data,
)

README = Path(__file__).resolve().parents[2] / "README.md"
MODELS = model_configurations()
LOCAL = [name for name, method in METHODS.items() if method.local]
GLOBAL = [name for name, method in METHODS.items() if not method.local]
N_POINTS = 4
TOLERANCE = 1e-8

def _cells(names):
    return [pytest.param(method, model_id, id=f"{method}-{model_id}")
            for method in names for model_id in MODELS]


def _model(model_id):
    cls, settings = MODELS[model_id]
    return fitted(cls, **settings)


def _points(model_id):
    cls, _ = MODELS[model_id]
    return training_data(cls)[0][:N_POINTS]


@functools.cache
def _outcome(method_name, model_id, output=None):
    """The method's result on the model, or the exception it raised."""
    method = METHODS.get(method_name)
    model = _model(model_id)
    options = {} if output is None else {"output": output}
    try:
        if method.local:
            return method.function(model, _points(model_id), **options)
        return method.function(model, **options)
    except Exception as error:  # noqa: BLE001 - the matrix records what each cell does
        return error


def _applicable_names(method_name) -> set[str]:
    """Estimator and kernel class names of the cells where the method ran."""
    names = set()
    for model_id, (cls, _) in MODELS.items():
        if not isinstance(_outcome(method_name, model_id), Exception):
            names.add(cls.__name__)
            names.update(type(kernel).__name__
                         for kernel in posterior_kernels(_model(model_id).posterior_))
    return names


def _check_refusal(method_name, error):
    assert isinstance(error, TypeError | ValueError), repr(error)
    applicable = _applicable_names(method_name)
    message = str(error)
    assert any(re.search(rf"\b{name}\b", message) for name in applicable), (
        f"{method_name} refuses without naming what it applies to ({sorted(applicable)}): "
        f"{message}"
    )


def _result_or_checked_refusal(method_name, model_id):
    """The cell's result, or None after checking that its refusal names what applies."""
    outcome = _outcome(method_name, model_id)
    if isinstance(outcome, Exception):
        _check_refusal(method_name, outcome)
        return None
    return outcome


def _check_complete(result):
    assert result.baseline_prediction is not None, "complete methods report their base value"
    target = result.prediction - result.baseline_prediction
    scale = (np.abs(result.prediction).max() + np.abs(np.asarray(result.baseline_prediction)).max()
             + np.abs(result.mean).sum(1).max())
    np.testing.assert_allclose(result.mean.sum(1), target, rtol=0, atol=TOLERANCE * scale)
    if result.cov is not None and result.difference_variance is not None:
        total = result.cov.sum(axis=(1, 2))
        scale = result.difference_variance.max() + np.abs(result.cov).sum(axis=(1, 2)).max()
        np.testing.assert_allclose(total, result.difference_variance, rtol=0,
                                   atol=TOLERANCE * scale)


def _check_attribution(method_name, result, n_features):
    if METHODS.get(method_name).outputs == "interactions":
        assert isinstance(result, ShapleyInteractions), type(result)
        assert list(result.efficiency_weights) == [1.0] * result.mean.shape[1], (
            "the default index is efficient over all its values")
        n_features += n_features * (n_features - 1) // 2
    else:
        assert isinstance(result, Attribution), type(result)
    assert result.mean.shape == (N_POINTS, n_features)
    assert result.prediction.shape == (N_POINTS,)
    assert np.all(np.isfinite(result.mean)) and np.all(np.isfinite(result.prediction))
    assert result.cov is not None, "return_cov defaults to True"
    assert result.cov.shape == (N_POINTS, n_features, n_features)
    assert np.all(np.isfinite(result.cov))
    scale = np.abs(result.cov).max()
    np.testing.assert_allclose(result.cov, np.swapaxes(result.cov, 1, 2), rtol=0,
                               atol=1e-12 * scale)
    assert np.all(np.einsum("pii->pi", result.cov) >= -1e-12 * scale)
    if METHODS.get(method_name).complete:
        _check_complete(result)


# -- the matrix ----------------------------------------------------------------------------
@pytest.mark.parametrize("method_name, model_id", _cells(LOCAL))
def test_local_method_runs_or_refuses_by_name(method_name, model_id):
    outcome = _result_or_checked_refusal(method_name, model_id)
    if outcome is not None:
        _check_attribution(method_name, outcome, _model(model_id).n_features_in_)


@pytest.mark.parametrize("method_name, model_id", _cells(GLOBAL))
def test_global_method_runs_or_refuses_by_name(method_name, model_id):
    outcome = _result_or_checked_refusal(method_name, model_id)
    if outcome is None:
        return
    n_features = _model(model_id).n_features_in_
    assert list(outcome.feature_names) == _model(model_id).feature_names_in_
    arrays = {name: value for name, value in vars(outcome).items()
              if isinstance(value, np.ndarray | float)}
    assert arrays, "a global result reports numbers"
    for name, value in arrays.items():
        assert np.all(np.isfinite(value)), name
        assert np.ndim(value) == 0 or np.shape(value) == (n_features,), (name, np.shape(value))


@pytest.mark.parametrize("method_name", list(METHODS))
def test_every_method_applies_to_some_model(method_name):
    ran = [model_id for model_id in MODELS
           if not isinstance(_outcome(method_name, model_id), Exception)]
    assert ran, f"{method_name} ran on none of {list(MODELS)}"


def _level_cells():
    return [
        pytest.param(method, model_id, level, id=f"{method}-{model_id}-{level}")
        for method in LOCAL
        for model_id, (cls, _) in MODELS.items() if is_classifier(cls)
        for level in LEVELS
    ]


@pytest.mark.parametrize("method_name, model_id, level", _level_cells())
def test_classifier_levels_run_where_declared(method_name, model_id, level):
    method = METHODS.get(method_name)
    if isinstance(_outcome(method_name, model_id), Exception):
        pytest.skip(f"{method_name} does not apply to {model_id} (checked by the matrix)")
    outcome = _outcome(method_name, model_id, level)
    if level in method.levels:
        assert not isinstance(outcome, Exception), repr(outcome)
        _check_attribution(method_name, outcome, _model(model_id).n_features_in_)
        return
    assert isinstance(outcome, TypeError | ValueError), repr(outcome)
    offering = [other.function.__name__ for _, other in METHODS.items() if level in other.levels]
    assert any(name in str(outcome) for name in offering), (offering, str(outcome))


# -- what every entry declares -------------------------------------------------------------
@pytest.mark.parametrize("method_name", list(METHODS))
def test_every_method_cites_a_publication(method_name):
    method = METHODS.get(method_name)
    assert method.references, f"{method_name} cites nothing"
    for reference in method.references:
        assert reference.authors.strip() and reference.title.strip(), reference
        assert isinstance(reference.year, int) and 1900 <= reference.year <= 2100, reference
        assert str(reference.year) in str(reference)
    assert method.summary.strip()


@pytest.mark.parametrize("method_name", list(METHODS))
def test_every_method_is_exported_and_shown_in_the_readme(method_name):
    function = METHODS.get(method_name).function
    assert getattr(gx, function.__name__) is function
    assert f"gx.{function.__name__}(" in README.read_text(), function.__name__


@pytest.mark.parametrize(
    "method_name", [name for name, method in METHODS.items() if method.cli_name]
)
def test_every_command_line_name_is_listed_in_the_readme(method_name):
    cli_name = METHODS.get(method_name).cli_name
    listed = re.search(rf"--method\s+(?:[\w-]+\|)*{re.escape(cli_name)}(?![\w-])",
                       README.read_text())
    assert listed, f"README.md never shows --method {cli_name}"


def test_command_line_names_are_unique():
    names = [method.cli_name for _, method in METHODS.items() if method.cli_name]
    assert len(names) == len(set(names)), names


@pytest.mark.parametrize(
    "method_name", [name for name, method in METHODS.items() if method.cli_name]
)
def test_every_command_line_method_is_reachable(method_name):
    assert method_name in ARGUMENTS, "no command-line arguments registered"
    families = [name for name, family in FAMILIES.items() if method_name in family.methods]
    assert families, "no model family offers it"
    assert method_id(METHODS.get(method_name).cli_name) == method_name
