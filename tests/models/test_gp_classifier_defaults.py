"""GPClassifier's defaults for fast fits (issue 26): inducing points chosen from the rows and
the classes, the ELBO tolerance, and the command line's classifier using both unless
``--n-inducing`` is given."""

from __future__ import annotations

import numpy as np
import pytest

import gpexplain as gx
from gpexplain.models.families import FAMILIES, Settings
from gpexplain.models.gp_classifier import default_n_inducing


def _blobs(n_classes, n=60, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % n_classes
    X = rng.normal(size=(n, 2)) + 1.5 * np.column_stack([np.cos(y * 2.1), np.sin(y * 2.1)])
    return X, y


@pytest.mark.parametrize(("n_rows", "n_latents", "expected"), [
    (500, 1, 64), (30, 1, 30), (500, 2, 64), (500, 4, 64), (500, 6, 42), (1347, 10, 32),
    (10, 10, 10), (5000, 30, 32),
])
def test_default_n_inducing_shares_a_budget_among_the_latents(n_rows, n_latents, expected):
    assert default_n_inducing(n_rows, n_latents) == expected


def test_default_fit_uses_the_chosen_inducing_points_and_a_given_number_wins():
    X, y = _blobs(6, n=60)
    model = gx.GPClassifier(max_iter=5).fit(X, y)
    assert [z.shape[0] for z in model.inducing_points_] == [42] * 6
    given = gx.GPClassifier(n_inducing=5, max_iter=5).fit(X, y)
    assert [z.shape[0] for z in given.inducing_points_] == [5] * 6


def test_tolerance_stops_the_elbo_early_near_the_full_optimum():
    X, y = _blobs(2)
    steps = {}

    def fit(tol):
        calls = []
        model = gx.GPClassifier(n_inducing=6, max_iter=150, tol=tol).fit(
            X, y, callback=lambda step, total: calls.append(step))
        steps[tol] = len(calls)  # one call per ELBO evaluation (plus the closing one)
        return model

    stopped, full = fit(1e-3), fit(None)
    assert steps[1e-3] < steps[None] / 2
    assert stopped.elbo_ >= full.elbo_ - 1e-3 * len(y) * 10  # within the tolerance's reach
    assert np.mean(stopped.predict(X) == full.predict(X)) >= 0.95
    again = gx.GPClassifier(n_inducing=6, max_iter=150, tol=1e-3).fit(X, y)
    assert again.elbo_ == stopped.elbo_  # the stop is deterministic


def test_command_line_classifier_takes_its_own_inducing_points_unless_given():
    parameters = FAMILIES.get("classifier").parameters
    assert parameters(Settings("ard", 0, 1000))["n_inducing"] is None
    assert parameters(Settings("ard", 0, 1000, 300, n_inducing_given=True))["n_inducing"] == 300
    assert parameters(Settings("ard", 0, 50, 300, n_inducing_given=True))["n_inducing"] == 50
