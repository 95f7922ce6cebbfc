"""The contracts of the Shapley-game and measure registries (``GAMES``, ``MEASURES``).

Games: every registered game, given its reference distribution through its keyword of
``gx.shapley_values`` (every registered measure, for a game that takes a measure), on a small
exact GP with the ARD squared-exponential (a product kernel):

* the Shapley values equal brute-force enumeration of the game ``v(S) = E_r m(x_S, r_-S)``
  over all 2^d coalitions with the classical weights (``tests/reference/shapley_games.py``),
  where the posterior mean ``m(x) = m0 + k(x, Z) alpha`` is computed here from the
  hyperparameters (``alpha = (K + noise I)^{-1} (y - m0)`` by ``np.linalg.solve``, the kernel
  written out), sharing no code with the library;
* they are complete: they sum to ``m(x) - v(empty)``, and the ``prediction`` and base value
  reported are ``m(x)`` and ``v(empty)``;
* the keyword alone selects the game (``game=`` may be left out).

The reference distribution of a measure game is the tensor grid of per-feature quadrature
atoms from ``tests/reference/shapley_brute_force.py`` (Gauss-Hermite for a Gaussian, one-panel
Gauss-Legendre for a box, the columns themselves for the empirical measure): exact to
round-off for these smooth integrands (agreement measured below 1e-14 of the scale), hence
the 1e-12 relative tolerance.

Measures: every registered measure is built for 2 features, ``resolve(2)`` keeps it and
``resolve(3)`` refuses; an unknown measure's error lists every registered one (the registry's,
``check_measure``'s and each estimator option's that takes a measure).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import gpexplain as gx
from gpexplain.functionals.games import GAMES
from gpexplain.kernels import RBF
from gpexplain.kernels.measures import MEASURES, check_measure
from gpexplain.models._params import InvalidParameterError, Options
from tests.contracts._models import ESTIMATOR_CLASSES, small, training_data
from tests.reference import shapley_brute_force as brute
from tests.reference import shapley_games

D = 3
LENGTHSCALE = np.array([0.8, 1.1, 1.6])
VARIANCE = 1.3
NOISE = 0.05
PRIOR_MEAN = 0.3
TOLERANCE = 1e-12
rng = np.random.default_rng(5)
Z = rng.uniform(-1.5, 1.5, size=(20, D))
Y = np.sin(Z[:, 0]) * np.cos(Z[:, 1]) + 0.5 * Z[:, 2] + 0.05 * rng.normal(size=20)
X = rng.uniform(-1.0, 1.0, size=(3, D))


def _measure(cls, n_features):
    """An instance of a registered measure class over ``n_features`` features.

    Built from its constructor's arity: one argument is a sample (rows, n_features); two are
    per-feature arrays ``(first, second)`` with ``first < second`` and ``second > 0`` (a
    mean and a std, or a box). A measure built otherwise needs a branch here.
    """
    arity = len(inspect.signature(cls).parameters)
    if arity == 1:
        return cls(np.random.default_rng(3).normal(size=(6, n_features)))
    if arity == 2:
        return cls(np.linspace(-0.5, 0.0, n_features), np.linspace(0.6, 0.9, n_features))
    raise AssertionError(f"no construction for the measure {cls.__name__}: add one here")


# Per-feature (nodes, weights) atoms of each registered measure: its independent quadrature.
REFERENCE_ATOMS = {
    "gaussian": lambda measure: brute.gaussian_atoms(measure.mean, measure.std, 24),
    "uniform": lambda measure: brute.legendre_atoms(measure.low, measure.high, 20),
    "empirical": lambda measure: brute.empirical_atoms(measure.points),
}


def _reference_rows(argument, value):
    """Reference rows r and weights of the game ``v(S) = sum_r w_r m(x_S, r_-S)``."""
    if argument == "baseline":
        return np.atleast_2d(value), np.ones(1)
    if argument == "background":
        return value, np.full(len(value), 1.0 / len(value))
    if argument == "measure":
        name = next(name for name, cls in MEASURES.items() if type(value) is cls)
        return shapley_games.product_measure_references(REFERENCE_ATOMS[name](value))
    raise AssertionError(f"no reference distribution for the game argument {argument!r}")


# The values each game argument is exercised with.
ARGUMENT_VALUES = {
    "baseline": lambda: [np.array([0.2, -0.4, 0.1])],
    "background": lambda: [rng.uniform(-1.0, 1.0, size=(5, D))],
    "measure": lambda: [_measure(cls, D) for _, cls in MEASURES.items()],
}


def _game_cases():
    cases = []
    for name, game in GAMES.items():
        values = ARGUMENT_VALUES[game.argument]() if game.argument in ARGUMENT_VALUES else [None]
        for value in values:
            label = name if value is None or game.argument != "measure" else (
                f"{name}-{type(value).__name__}")
            cases.append(pytest.param(name, value, id=label))
    return cases


def _posterior_mean(points):
    """``m0 + k(points, Z) alpha`` from the hyperparameters, without the library."""
    def k(A, B):
        scaled = (A[:, None, :] - B[None, :, :]) / LENGTHSCALE
        return VARIANCE * np.exp(-0.5 * np.sum(scaled**2, axis=-1))

    alpha = np.linalg.solve(k(Z, Z) + NOISE * np.eye(len(Z)), Y - PRIOR_MEAN)
    return PRIOR_MEAN + k(points, Z) @ alpha


@pytest.fixture(scope="module")
def posterior():
    return gx.ExactPosterior(Z, Y, RBF(LENGTHSCALE, VARIANCE), noise=NOISE, mean=PRIOR_MEAN)


def test_every_game_argument_has_values():
    for name, game in GAMES.items():
        assert game.argument in ARGUMENT_VALUES, f"game {name!r}: add its argument's values"
        assert game.argument in inspect.signature(gx.shapley_values).parameters, name
        assert game.reference.strip(), name


@pytest.mark.parametrize("game_name, value", _game_cases())
def test_game_equals_brute_force_enumeration_and_is_complete(posterior, game_name, value):
    argument = GAMES.get(game_name).argument
    result = gx.shapley_values(posterior, X, game=game_name, **{argument: value})
    references, weights = _reference_rows(argument, value)
    for p, x in enumerate(X):
        points, index = shapley_games.game_points(x, references, weights)
        values = _posterior_mean(points)
        expected = shapley_games.shapley_stencil(index, D, len(points)) @ values
        empty_rows, empty_weights = index[frozenset()]
        base_value = values[empty_rows] @ empty_weights
        own = _posterior_mean(x[None, :])[0]
        scale = np.abs(expected).sum() + abs(own) + abs(base_value)
        np.testing.assert_allclose(result.mean[p], expected, rtol=0, atol=TOLERANCE * scale)
        np.testing.assert_allclose(result.prediction[p], own, rtol=0, atol=TOLERANCE * scale)
        np.testing.assert_allclose(np.atleast_1d(result.baseline_prediction)[0], base_value,
                                   rtol=0, atol=TOLERANCE * scale)
        np.testing.assert_allclose(result.mean[p].sum(), own - base_value, rtol=0,
                                   atol=TOLERANCE * scale)


@pytest.mark.parametrize("game_name, value", _game_cases())
def test_the_games_keyword_selects_it(posterior, game_name, value):
    argument = GAMES.get(game_name).argument
    named = gx.shapley_values(posterior, X[:1], game=game_name, return_cov=False,
                              **{argument: value})
    implied = gx.shapley_values(posterior, X[:1], return_cov=False, **{argument: value})
    np.testing.assert_array_equal(implied.mean, named.mean)
    assert game_name in implied.method


def test_an_unknown_game_lists_every_game(posterior):
    with pytest.raises(ValueError) as raised:
        gx.shapley_values(posterior, X[:1], game="no-such-game")
    for name in GAMES:
        assert repr(name) in str(raised.value), name


# -- measures --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(MEASURES))
def test_every_measure_resolves_to_its_feature_count(name):
    cls = MEASURES.get(name)
    assert name in REFERENCE_ATOMS, f"measure {name!r}: add its reference atoms"
    measure = _measure(cls, 2)
    assert check_measure(measure) is measure
    resolved = measure.resolve(2)
    assert type(resolved) is cls and resolved.n_features == 2
    with pytest.raises(ValueError, match=r"\b2\b.*\b3\b"):
        measure.resolve(3)
    atoms = REFERENCE_ATOMS[name](resolved)
    assert len(atoms) == 2 and all(np.isclose(w.sum(), 1.0) for _, w in atoms)


def test_an_unknown_measure_name_lists_every_measure():
    with pytest.raises(ValueError) as raised:
        MEASURES.get("no-such-measure")
    for name in MEASURES:
        assert repr(name) in str(raised.value), name


def test_a_measure_of_the_wrong_type_lists_every_measure_class(posterior):
    messages = []
    with pytest.raises(TypeError) as raised:
        check_measure(next(iter(MEASURES)))  # a name where an instance is expected
    messages.append(str(raised.value))
    with pytest.raises(TypeError) as raised:
        gx.shapley_values(posterior, X[:1], game="product-measure", measure="gaussian")
    messages.append(str(raised.value))
    for message in messages:
        for _, cls in MEASURES.items():
            assert f"gx.measures.{cls.__name__}" in message, (cls.__name__, message)


def _measure_options():
    """Every estimator parameter named ``measure`` (an option over registered measures)."""
    return [
        pytest.param(cls, constraint, id=f"{cls.__name__}-measure")
        for cls in ESTIMATOR_CLASSES
        for parameter, constraint in cls._parameter_constraints.items()
        if parameter == "measure"
    ]


def test_some_estimator_takes_a_measure_option():
    assert _measure_options(), "no estimator has a measure= option"


@pytest.mark.parametrize("cls, constraint", _measure_options())
def test_a_measure_option_accepts_registered_measures_and_lists_them(cls, constraint):
    assert isinstance(constraint, Options)
    accepted = [value for value in constraint.values if value is not None]
    assert accepted and all(name in MEASURES for name in accepted), accepted
    with pytest.raises(InvalidParameterError) as raised:
        small(cls, measure="no-such-measure").fit(*training_data(cls))
    for name in accepted:
        assert repr(name) in str(raised.value), name
