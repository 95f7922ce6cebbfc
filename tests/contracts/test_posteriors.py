"""The contract every posterior satisfies, whatever built it (``gpexplain.posterior.base``).

Run over the posterior of every small fitted estimator configuration
(``tests/contracts/_models.py``), of the scikit-learn adapters and each output's marginal of
the multi-output posteriors (``tests/contracts/_multi_output.py``); every posterior class
exported by ``gpexplain.posterior`` must be produced by some case
(``test_every_posterior_class_has_a_case``). Checked:

* the representer mean ``m0 + k(X, Z) alpha``, computed here from the posterior's
  ``mean``, ``cross_kernel`` (``k(X, Z)``; for an output of an LMC ``sum_q B^q[i, task_n]
  k_q(X, Z)``) and ``alpha`` (a mixture: the weighted means of its
  components), equals the prediction of the model that built it (``predict`` of a regressor,
  ``decision_function`` of a classifier, scikit-learn's latent mean for the adapters) to 1e-10
  of the scale (1e-8 against scikit-learn's own Laplace iteration);
* the quadratic form ``Q``: ``quadratic_form(A, B) = quadratic_form(B, A)^T``,
  ``quadratic_form(A)`` equals ``quadratic_form(A, A)``, and the posterior covariance it gives,
  ``k(X, X) - k(X, Z) Q k(Z, X)``, is positive semi-definite at the training or inducing
  inputs and at new points (``Q`` itself need not be: a variational posterior's
  ``K^{-1} - K^{-1} S K^{-1}`` is indefinite when ``S`` is far from ``K``), with
  ``cross_kernel`` in place of ``k(X, Z)``;
* ``predict(X)``'s variances equal the diagonal of ``predict(X, return_cov=True)``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessClassifier, GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

import gpexplain as gx
import gpexplain.posterior
from gpexplain.posterior import MixturePosterior, Posterior
from gpexplain.posterior.base import PosteriorProtocol
from tests.contracts import _multi_output as multi_output
from tests.contracts._models import (
    cases,
    classification_data,
    fitted,
    is_classifier,
    model_configurations,
    regression_data,
)

VARIANCE_OF_GPX = (
    "known defect: LocallyLinear.diag includes weight_noise |z|^2 and its Gram matrix does "
    "not, so GPXRegressor's predict(X) variances are several times the diagonal of "
    "predict(X, return_cov=True)"
)
# (test, case) pairs that fail today: known defects, each xfail flips when fixed.
KNOWN_DEFECTS = {(test, "GPXRegressor"): VARIANCE_OF_GPX for test in ("variance", "protocol")}


def _from_sklearn_regressor():
    X, y = regression_data()
    kernel = ConstantKernel(1.0) * RBF(np.ones(X.shape[1])) + WhiteKernel(0.1)
    model = GaussianProcessRegressor(kernel, random_state=0).fit(X, y)
    return gx.from_sklearn(model), lambda Xq: model.predict(Xq), 1e-10


def _from_sklearn_classifier():
    X, y = classification_data(2)
    model = GaussianProcessClassifier(ConstantKernel(1.0) * RBF(np.ones(X.shape[1])),
                                      random_state=0).fit(X, y)
    return (gx.from_sklearn(model),
            lambda Xq: model.base_estimator_.latent_mean_and_variance(Xq)[0], 1e-8)


def _from_estimator(model_id):
    cls, settings = model_configurations()[model_id]
    model = fitted(cls, **settings)
    reference = model.decision_function if is_classifier(cls) else model.predict
    return model.posterior_, reference, 1e-10


def _marginal_of(name, output):
    posterior, predict, _ = multi_output.case(name)
    return posterior.marginal(output), lambda Xq: predict(Xq)[:, output], 1e-10


# name -> builder of (posterior, reference mean function of the model's inputs, tolerance)
CASES = {
    **{model_id: functools.partial(_from_estimator, model_id)
       for model_id in model_configurations()},
    "from_sklearn(GaussianProcessRegressor)": _from_sklearn_regressor,
    "from_sklearn(GaussianProcessClassifier)": _from_sklearn_classifier,
    # Each output of a multi-output posterior is a single-output posterior (its marginal).
    **{f"{name}.marginal({output})": functools.partial(_marginal_of, name, output)
       for name in multi_output.CASES for output in range(len(multi_output.OUTPUT_NAMES))},
}


@functools.cache
def _case(name):
    return CASES[name]()


def _cases(test):
    return cases(CASES, test, KNOWN_DEFECTS)


def _components(posterior):
    """``[(weight, Gaussian posterior)]``: the posterior itself, or a mixture's components."""
    if isinstance(posterior, MixturePosterior):
        return list(zip(posterior.weights, posterior.components, strict=True))
    return [(1.0, posterior)]


def _queries(posterior):
    """Training (or inducing) inputs and new points near them, in the posterior's columns."""
    _, first = _components(posterior)[0]
    Z = first.train_inputs[:6]
    shift = np.random.default_rng(4).normal(scale=0.3, size=Z.shape)
    return np.vstack([Z, Z + shift])


def _model_inputs(posterior, queries):
    """The queries as the model takes them (GPX: the x columns; it appends z = x itself)."""
    _, first = _components(posterior)[0]
    if isinstance(first.kernel, gx.kernels.LocallyLinear):
        x, z = first.kernel.split(queries)
        return x, np.hstack([x, x])
    return queries, queries


def test_every_posterior_class_has_a_case():
    exported = [getattr(gpexplain.posterior, name) for name in gpexplain.posterior.__all__]
    classes = [cls for cls in exported if isinstance(cls, type)
               and (issubclass(cls, Posterior | MixturePosterior)) and cls is not Posterior]
    assert len(classes) >= 5, classes
    covered = {type(_case(name)[0]) for name in CASES}
    missing = [cls.__name__ for cls in classes if cls not in covered]
    assert not missing, f"posterior classes no contract case builds: {missing}"


@pytest.mark.parametrize("name", _cases("protocol"))
def test_every_posterior_satisfies_the_protocol(name):
    posterior = _case(name)[0]
    assert isinstance(posterior, PosteriorProtocol)
    queries = _queries(posterior)
    checked = posterior.check_inputs(queries)
    assert checked.shape == (len(queries), posterior.n_features)
    assert posterior.data_inputs.shape[1] == posterior.n_features == len(posterior.feature_names)
    mean, var = posterior.predict(checked)
    np.testing.assert_allclose(posterior.predict_mean(checked), mean, rtol=1e-12, atol=1e-12)
    gap = posterior.difference_variance(checked, checked[0])
    assert gap.shape == (len(queries),) and np.all(gap >= 0)
    assert gap[0] <= 1e-9 * var.max()  # f(x) - f(x) has no variance


@pytest.mark.parametrize("name", _cases("mean"))
def test_representer_mean_is_the_models_prediction(name):
    posterior, reference, tolerance = _case(name)
    inputs, queries = _model_inputs(posterior, _queries(posterior))
    terms = [
        (weight, component.mean, component.cross_kernel(queries) @ component.alpha)
        for weight, component in _components(posterior)
    ]
    representer = sum(weight * (m0 + cross) for weight, m0, cross in terms)
    scale = max(abs(weight) * (abs(m0) + np.abs(cross).max()) for weight, m0, cross in terms)
    expected = reference(inputs)
    assert np.all(np.isfinite(representer))
    np.testing.assert_allclose(representer, expected, rtol=0, atol=tolerance * scale)


@pytest.mark.parametrize("name", _cases("quadratic-form"))
def test_quadratic_form_is_symmetric_and_gives_a_psd_covariance(name):
    posterior, _, _ = _case(name)
    queries = _queries(posterior)
    for _, component in _components(posterior):
        left = component.cross_kernel(queries)
        right = component.cross_kernel(queries[:4] * 0.7)
        forward = component.quadratic_form(left, right)
        assert forward.shape == (len(left), len(right))
        scale = np.abs(forward).max()
        np.testing.assert_allclose(forward, component.quadratic_form(right, left).T, rtol=0,
                                   atol=1e-12 * scale)
        gram = component.quadratic_form(left)
        np.testing.assert_allclose(gram, component.quadratic_form(left, left), rtol=0,
                                   atol=1e-10 * np.abs(gram).max())
        covariance = component.kernel(queries, queries) - gram
        covariance = 0.5 * (covariance + covariance.T)
        eigenvalues = np.linalg.eigvalsh(covariance)
        prior_scale = np.abs(component.kernel(queries, queries)).max()
        assert eigenvalues.min() >= -1e-10 * prior_scale, eigenvalues.min() / prior_scale


@pytest.mark.parametrize("name", _cases("variance"))
def test_predicted_variance_is_the_diagonal_of_the_predicted_covariance(name):
    posterior, _, _ = _case(name)
    queries = _queries(posterior)
    mean, variance = posterior.predict(queries)
    full_mean, covariance = posterior.predict(queries, return_cov=True)
    assert covariance.shape == (len(queries), len(queries))
    np.testing.assert_allclose(full_mean, mean, rtol=0, atol=1e-12 * np.abs(mean).max())
    np.testing.assert_allclose(variance, np.diag(covariance), rtol=0,
                               atol=1e-10 * np.abs(covariance).max())
