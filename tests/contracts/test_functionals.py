"""The contract every (linear functional, kernel type) registration satisfies.

One parametrised module, like GPyTorch's ``_base_kernel_test_case.py``: a registration passes
when its scheme agrees with the functional applied *numerically* to the kernel itself.

Each functional L is written here as a stencil, ``L_i g(x) ~ sum_m W[i, m] g(s_m)`` over
points s_m, independently of gpexplain:

* gradient: central differences ``(g(x + h e_i) - g(x - h e_i)) / 2h`` (h = 1e-5: truncation
  h^2 |g'''| / 6 ~ 1e-11, round-off eps |g| / h ~ 1e-11 relative);
* integrated gradient: ``(x_i - xt_i) int_0^1 d_i g(xt + t (x - xt)) dt`` by 64-node
  Gauss-Legendre of those differences, averaged over the baselines;
* additive Shapley value: the marginal game under the measure, enumerated over its atoms
  (empirical measure: exact; Gaussian: 20-node Gauss-Hermite per feature) and combined with
  the classical Shapley weights (``tests.reference.shapley_brute_force``);
* product-kernel Shapley value: the game ``v(S) = E_r g(x_S, r_-S)`` enumerated over the
  reference rows (baseline, background, or the Gauss-Hermite grid of a Gaussian measure;
  ``tests.reference.shapley_games``);
* Shapley interactions (order-1 values and pairs, ``D + D (D - 1) / 2`` outputs): the same
  games with the index's stencil (``tests.reference.shapley_interactions``); completeness is
  then the index's efficiency (``efficiency_weights``).

Checked per registration: the cross term against ``W k(S, z_n)``; the prior term against
L' applied to the cross term's second argument, ``W_j . cross(x, Z = S)_i`` (the definition
``P_ij = L_i L'_j k``), symmetric and positive semi-definite; ``cross_and_prior`` equal to the
separate terms (the cross term bit for bit: both driver paths take the mean from it); and,
through the driver, completeness where the functional has it. Tolerances, relative to the
largest entry: 1e-8 where the stencil differences a smooth function (its own error is
~1e-10), 1e-7 for the plain quadrature of a Matern kernel or a product with a linear kernel
(Simpson / staggered prior terms, measured ~2e-9), 1e-12 for the exact empirical-measure
enumeration.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations
from math import factorial

import gpytorch.kernels as gk
import numpy as np
import pytest

from gpexplain.explain._driver import explain
from gpexplain.functionals import AdditiveShapley, Gradient, IntegratedGradient, ProductShapley
from gpexplain.functionals.additive_interactions import AdditiveShapleyInteraction
from gpexplain.functionals.base import LinearFunctional
from gpexplain.functionals.local_linear_weight import LocalLinearWeight
from gpexplain.functionals.product_interactions import (
    ProductShapleyInteraction,
    efficiency_weights,
)
from gpexplain.functionals.terms import CoregionalTerms
from gpexplain.kernels import RBF, GPyTorchKernel, OrthogonalAdditive, RandomFeatureKernel
from gpexplain.kernels.gpytorch_adapter import input_scaled
from gpexplain.kernels.locally_linear import LocallyLinear
from gpexplain.kernels.measures import Empirical, Gaussian
from gpexplain.posterior import ExactPosterior
from tests.kernels.test_derivatives import _set
from tests.reference import shapley_brute_force as brute
from tests.reference import shapley_games
from tests.reference.shapley_interactions import interaction_stencil

D = 3
STEP = 1e-5
N_NODES = 64
rng = np.random.default_rng(11)
X = rng.uniform(-1.0, 1.0, size=(2, D))
Z = rng.uniform(-1.5, 1.5, size=(5, D))
BASELINES = np.array([[0.1, -0.2, 0.3], [-0.6, 0.4, -0.1]])
ATOMS = rng.uniform(-1.0, 1.0, size=(4, D))


def _matern52():
    base = _set(gk.MaternKernel(nu=2.5, ard_num_dims=D), lengthscale=[0.9, 1.3, 1.7])
    return GPyTorchKernel(_set(gk.ScaleKernel(base), outputscale=1.4))


def _input_scaled_periodic_times_linear():
    periodic = _set(gk.PeriodicKernel(), period_length=2.5, lengthscale=1.2)
    product = gk.ProductKernel(periodic, _set(gk.LinearKernel(), variance=0.5))
    return GPyTorchKernel(input_scaled(product.double(), [0.1, 0.0, -0.2], [1.5, 0.8, 1.1], 2.0))


def _matern_product():
    """Matern 5/2 on feature 0 times an RQ on feature 2 (feature 1 ignored)."""
    matern = _set(gk.MaternKernel(nu=2.5, active_dims=[0]), lengthscale=0.9)
    rq = _set(gk.RQKernel(active_dims=[2]), lengthscale=1.3, alpha=0.7)
    return GPyTorchKernel(_set(gk.ScaleKernel(gk.ProductKernel(matern, rq)), outputscale=1.4))


def _random_features():
    return RandomFeatureKernel(np.random.default_rng(2).normal(size=(30, D)) / 1.1, 1.3)


def _additive(measure):
    return OrthogonalAdditive([0.8, 1.2, 1.5], [0.2, 1.0, 0.5, 0.25], measure)


def _coregional_terms():
    """One output's term form of a two-term LMC, its weights the same at every basis point
    (so that it is the kernel 0.7 k_1 + 1.3 k_2 for any Z, as the stencils here need; the
    weights per basis point are checked in tests/explain/test_lmc.py)."""
    return CoregionalTerms([RBF([0.8, 1.1, 1.6], 1.0), RBF([2.0, 0.7, 1.2], 1.0)], [0.7, 1.3],
                           [[0.7], [1.3]])


# name -> (functional, kernel, tolerance of the stencil comparison)
CASES = {
    "gradient-rbf": (lambda: Gradient(), lambda: RBF([0.8, 1.1, 1.6], 1.2), 1e-8),
    "gradient-matern52": (lambda: Gradient(), _matern52, 1e-8),
    "gradient-random-features": (lambda: Gradient(), _random_features, 1e-8),
    "gradient-input-scaled-product": (
        lambda: Gradient(), _input_scaled_periodic_times_linear, 1e-8,
    ),
    "ig-rbf": (lambda: IntegratedGradient(BASELINES[:1]), lambda: RBF([0.8, 1.1, 1.6], 1.2), 1e-8),
    "ig-rbf-distribution": (lambda: IntegratedGradient(BASELINES), lambda: RBF(0.9, 0.7), 1e-8),
    "ig-random-features": (lambda: IntegratedGradient(BASELINES[:1]), _random_features, 1e-8),
    "ig-matern52-graded": (lambda: IntegratedGradient(BASELINES[:1]), _matern52, 1e-8),
    "ig-matern52-distribution": (lambda: IntegratedGradient(BASELINES), _matern52, 1e-8),
    "ig-matern52-simpson": (
        lambda: IntegratedGradient(BASELINES[:1], rule="simpson"), _matern52, 1e-7,
    ),
    "ig-input-scaled-product-plain": (
        lambda: IntegratedGradient(BASELINES[:1]), _input_scaled_periodic_times_linear, 1e-7,
    ),
    "gradient-lmc-terms": (lambda: Gradient(), _coregional_terms, 1e-8),
    "ig-lmc-terms": (lambda: IntegratedGradient(BASELINES[:1]), _coregional_terms, 1e-8),
    "product-shapley-lmc-terms-baseline": (
        lambda: ProductShapley("baseline", references=BASELINES[:1]), _coregional_terms, 1e-12,
    ),
    "shapley-empirical": (lambda: AdditiveShapley(), lambda: _additive(Empirical(ATOMS)), 1e-12),
    "shapley-gaussian": (
        lambda: AdditiveShapley(), lambda: _additive(Gaussian([0.1, -0.2, 0.0], [0.7, 1.1, 0.9])),
        1e-8,
    ),
    "product-shapley-rbf-baseline": (
        lambda: ProductShapley("baseline", references=BASELINES[:1]),
        lambda: RBF([0.8, 1.1, 1.6], 1.2), 1e-12,
    ),
    "product-shapley-matern-product-interventional": (
        lambda: ProductShapley("interventional", references=BASELINES), _matern_product, 1e-12,
    ),
    "product-shapley-rbf-gaussian-measure": (
        lambda: ProductShapley(
            "product-measure", measure=Gaussian([0.1, -0.2, 0.0], [0.7, 1.1, 0.9])
        ),
        lambda: RBF([0.8, 1.1, 1.6], 1.2), 1e-8,
    ),
    "product-interactions-rbf-baseline-k-SII": (
        lambda: ProductShapleyInteraction("k-SII", "baseline", references=BASELINES[:1]),
        lambda: RBF([0.8, 1.1, 1.6], 1.2), 1e-12,
    ),
    "product-interactions-lmc-terms-baseline-k-SII": (
        lambda: ProductShapleyInteraction("k-SII", "baseline", references=BASELINES[:1]),
        _coregional_terms, 1e-12,
    ),
    "product-interactions-matern-product-interventional-STII": (
        lambda: ProductShapleyInteraction("STII", "interventional", references=BASELINES),
        _matern_product, 1e-12,
    ),
    "product-interactions-rbf-gaussian-measure-SII": (
        lambda: ProductShapleyInteraction(
            "SII", "product-measure", measure=Gaussian([0.1, -0.2, 0.0], [0.7, 1.1, 0.9])
        ),
        lambda: RBF([0.8, 1.1, 1.6], 1.2), 1e-8,
    ),
    "additive-interactions-empirical-k-SII": (
        lambda: AdditiveShapleyInteraction("k-SII"), lambda: _additive(Empirical(ATOMS)), 1e-12,
    ),
    "additive-interactions-empirical-STII": (
        lambda: AdditiveShapleyInteraction("STII"), lambda: _additive(Empirical(ATOMS)), 1e-12,
    ),
}
INTERACTIONS = (ProductShapleyInteraction, AdditiveShapleyInteraction)


def _n_outputs(functional):
    return D + D * (D - 1) // 2 if isinstance(functional, INTERACTIONS) else D


def _stencil(functional, kernel, x):
    """Points S (m, D) and weights W (D, m) with ``L_i g(x) ~ W[i] @ g(S)``."""
    if isinstance(functional, Gradient):
        points = np.repeat(x[None, :], 2 * D, axis=0)
        W = np.zeros((D, 2 * D))
        for i in range(D):
            points[2 * i, i] += STEP
            points[2 * i + 1, i] -= STEP
            W[i, 2 * i], W[i, 2 * i + 1] = 0.5 / STEP, -0.5 / STEP
        return points, W
    if isinstance(functional, IntegratedGradient):
        t, w = np.polynomial.legendre.leggauss(N_NODES)
        t, w = 0.5 * (t + 1.0), 0.5 * w
        gradient_points, gradient_weights = _stencil(Gradient(), kernel, x)
        points, weights = [], []
        for xt in functional.baselines:
            for node, weight in zip(t, w, strict=True):
                centre = xt + node * (x - xt)
                points.append(gradient_points - x + centre)
                factor = weight * (x - xt)[:, None] / len(functional.baselines)
                weights.append(factor * gradient_weights)
        return np.vstack(points), np.hstack(weights)
    if isinstance(functional, AdditiveShapley):
        measure = kernel.measure
        if isinstance(measure, Empirical):
            atoms = brute.empirical_atoms(ATOMS)
        else:
            atoms = brute.gaussian_atoms(measure.mean, measure.std, 20)
        points, index = brute.marginal_game_points(x, atoms)
        if isinstance(functional, AdditiveShapleyInteraction):
            return points, interaction_stencil(index, D, len(points), functional.index)
        W = np.zeros((D, len(points)))
        for i in range(D):  # phi_i = sum_{S not i} |S|! (D - |S| - 1)! / D! (v(S + i) - v(S))
            others = [j for j in range(D) if j != i]
            for size in range(D):
                share = factorial(size) * factorial(D - size - 1) / factorial(D)
                for S in combinations(others, size):
                    for subset, sign in ((frozenset(S) | {i}, 1.0), (frozenset(S), -1.0)):
                        rows, weights = index[subset]
                        W[i, rows] += sign * share * weights
        return points, W
    if isinstance(functional, ProductShapley):
        if functional.references is not None:
            references, weights = functional.references, None
        else:
            measure = functional.measure
            references, weights = shapley_games.product_measure_references(
                brute.gaussian_atoms(measure.mean, measure.std, 20)
            )
        points, index = shapley_games.game_points(x, references, weights)
        if isinstance(functional, ProductShapleyInteraction):
            return points, interaction_stencil(index, D, len(points), functional.index)
        return points, shapley_games.shapley_stencil(index, D, len(points))
    raise AssertionError(f"no stencil for {type(functional).__name__}")


def _case(name):
    make_functional, make_kernel, tolerance = CASES[name]
    functional, kernel = make_functional(), make_kernel()
    return functional, kernel, functional.bind(kernel, Z), tolerance


def _close(actual, expected, tolerance):
    scale = max(float(np.max(np.abs(expected))), 1e-300)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=tolerance * scale)


def _registered_type(functional_class, kernel):
    return next(k for k in type(kernel).__mro__ if k in functional_class._schemes)


# Registrations whose inputs and outputs differ in number (GPX: inputs [x, z], outputs z) have
# the same contract checked in their own module.
COVERED_ELSEWHERE = {
    (LocalLinearWeight, LocallyLinear): "tests/functionals/test_local_linear_weight.py",
    # Refusals (no derivative of GPX's f): tests/functionals/test_local_linear_weight.py.
    (Gradient, LocallyLinear): "tests/functionals/test_local_linear_weight.py",
    (IntegratedGradient, LocallyLinear): "tests/functionals/test_local_linear_weight.py",
}


def test_every_registration_has_a_case():
    covered = {
        (type(make_functional()), _registered_type(type(make_functional()), make_kernel()))
        for make_functional, make_kernel, _ in CASES.values()
    } | set(COVERED_ELSEWHERE)
    classes, found = list(LinearFunctional.__subclasses__()), []
    while classes:  # every registration, subclasses of subclasses included
        found.append(classes.pop())
        classes.extend(found[-1].__subclasses__())
    for functional_class in found:
        for kernel_type in functional_class._schemes:
            assert (functional_class, kernel_type) in covered, (functional_class, kernel_type)


@pytest.mark.parametrize("name", list(CASES))
def test_cross_term_is_the_functional_of_the_kernel(name):
    functional, kernel, scheme, tolerance = _case(name)
    cross = scheme.cross(X)
    assert cross.shape == (len(X), _n_outputs(functional), len(Z))
    for p, x in enumerate(X):
        points, W = _stencil(functional, kernel, x)
        _close(cross[p], W @ kernel(points, Z), tolerance)


@pytest.mark.parametrize("name", list(CASES))
def test_prior_term_is_the_functional_of_the_cross_term(name):
    functional, kernel, scheme, tolerance = _case(name)
    prior = scheme.prior(X)
    n_outputs = _n_outputs(functional)
    assert prior.shape == (len(X), n_outputs, n_outputs)
    _close(prior, np.swapaxes(prior, 1, 2), 1e-12)
    assert np.linalg.eigvalsh(prior).min() >= -1e-10 * np.abs(prior).max()
    for p, x in enumerate(X):
        points, W = _stencil(functional, kernel, x)
        cross = functional.bind(kernel, points).cross(x[None, :])[0]  # (D, m): L_i k(., s_m)
        _close(prior[p], cross @ W.T, tolerance)


@pytest.mark.parametrize("name", list(CASES))
def test_cross_and_prior_and_mean_only_paths_agree(name):
    _, _, scheme, _ = _case(name)
    cross, prior = scheme.cross_and_prior(X)
    # Bit for bit: the driver's mean-only path uses ``cross``, the other ``cross_and_prior``,
    # and an ill-conditioned posterior (huge alpha) amplifies any rounding difference.
    np.testing.assert_array_equal(cross, scheme.cross(X))
    np.testing.assert_allclose(prior, scheme.prior(X), rtol=0, atol=1e-14 * np.abs(prior).max())
    np.testing.assert_allclose(scheme.kernel_matrix(X), scheme.kernel(X, Z), rtol=0, atol=0)
    assert scheme.copies_per_point() >= 1


@pytest.mark.parametrize("name", list(CASES))
def test_completeness_through_the_driver(name):
    functional, kernel, _, tolerance = _case(name)
    y = np.sin(Z).sum(1)
    posterior = ExactPosterior(Z, y, kernel, noise=0.05, mean=0.3)
    attribution = explain(posterior, X, functional)
    mean_only = explain(posterior, X, functional, return_cov=False)
    np.testing.assert_array_equal(mean_only.mean, attribution.mean)
    baseline_prediction, _ = functional.completeness_target(posterior, X, False)
    if baseline_prediction is None:  # gradients: no completeness
        assert attribution.difference_variance is None
        return
    if isinstance(functional, INTERACTIONS):  # the index's efficiency weights
        e = efficiency_weights(functional.index, D)
        attribution = replace(attribution, mean=attribution.mean * e,
                              cov=e[:, None] * attribution.cov * e[None, :])
    gaps = attribution.completeness_gap()
    assert gaps["mean"] <= tolerance * np.abs(attribution.prediction).max()
    assert gaps["variance"] <= tolerance * attribution.difference_variance.max()


@pytest.mark.parametrize("name", list(CASES))
def test_two_point_prior_term_is_the_functional_of_the_cross_term(name):
    """``prior_between(x, x')_ij = L_i(x) L_j'(x') k`` (issue 25), checked as the prior term
    is: the stencil of x applied to the cross term at x'; equal to ``prior`` at x = x'. A
    scheme without it must refuse by name (``NotImplementedError``), never answer wrongly."""
    functional, kernel, scheme, tolerance = _case(name)
    try:
        between = scheme.prior_between(X, X[::-1])
    except NotImplementedError as error:
        assert "not yet supported" in str(error)
        return
    n_outputs = scheme.prior(X[:1]).shape[-1]  # D features, or D values of interactions
    assert between.shape == (len(X), len(X), n_outputs, n_outputs)
    for p, x in enumerate(X):
        points, W = _stencil(functional, kernel, x)
        for q, x2 in enumerate(X[::-1]):
            cross = functional.bind(kernel, points).cross(x2[None, :])[0]  # L_j(x') k(., s_m)
            _close(between[p, q], W @ cross.T, tolerance)
    same = scheme.prior_between(X, X)
    _close(same[np.arange(len(X)), np.arange(len(X))], scheme.prior(X), tolerance)
