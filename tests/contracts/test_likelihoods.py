"""The contract every registered likelihood satisfies: its expected log likelihood against
Monte Carlo.

For every entry of ``gpexplain.likelihoods.LIKELIHOODS`` and every link it takes,
``expected_log_likelihood(mean, var, targets(y))`` (the quantity a variational fit maximises)
equals the Monte Carlo average of ``sum_i log p(y_i | f_i)`` over 400,000 draws of
``f ~ N(mean, diag(var))``, with the log density written here from scipy (no code shared with
the library), within 5 standard errors (a false alarm has probability below 1e-6), plus the
stated error of a fixed quadrature rule where the likelihood uses one. A likelihood registered
without a reference here fails ``test_every_likelihood_has_a_reference``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import expit, log_softmax
from scipy.stats import norm

from gpexplain.likelihoods import LIKELIHOODS

Z_SCORE = 5.0
SAMPLES = 400_000
NOISE = 0.3
N_OBSERVATIONS = 5


def _binary(log_sigma):
    def log_density(f, y):
        return log_sigma((2.0 * y - 1.0)[:, None] * f[0])
    return log_density


# name -> (build(link), number of latents, draw targets, log p(y | f) for f (L, n, S), rule
# error). The categorical fit's fixed 256-point Sobol rule errs by ~3e-3 relative at C = 4.
REFERENCES = {
    "gaussian": (
        lambda link: LIKELIHOODS.get("gaussian")(noise=NOISE), 1,
        lambda rng: rng.normal(size=N_OBSERVATIONS),
        lambda f, y, link: norm.logpdf(y[:, None], f[0], np.sqrt(NOISE)), 0.0,
    ),
    "bernoulli": (
        lambda link: LIKELIHOODS.get("bernoulli")(link), 1,
        lambda rng: rng.integers(0, 2, size=N_OBSERVATIONS),
        lambda f, y, link: _binary(
            (lambda u: np.log(expit(u))) if link == "logit" else norm.logcdf)(f, y), 0.0,
    ),
    "categorical": (
        lambda link: LIKELIHOODS.get("categorical")(link), 4,
        lambda rng: np.arange(N_OBSERVATIONS) % 4,
        lambda f, y, link: log_softmax(f, axis=0)[y, np.arange(N_OBSERVATIONS)], 1e-2,
    ),
}
CASES = [pytest.param(name, link, id=f"{name}-{link}" if link else name)
         for name, likelihood in LIKELIHOODS.items() for link in (likelihood.links or (None,))]


def test_every_likelihood_has_a_reference():
    assert LIKELIHOODS.names(), "no likelihoods registered"
    assert set(LIKELIHOODS.names()) <= set(REFERENCES), "a likelihood without a reference"


@pytest.mark.parametrize("name, link", CASES)
def test_expected_log_likelihood_matches_monte_carlo(name, link):
    build, n_latents, draw_targets, log_density, rule_error = REFERENCES[name]
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(n_latents, N_OBSERVATIONS))
    var = rng.uniform(0.1, 2.0, size=(n_latents, N_OBSERVATIONS))
    y = draw_targets(rng)
    likelihood = build(link)
    value = float(likelihood.expected_log_likelihood(
        torch.as_tensor(mean), torch.as_tensor(var), likelihood.targets(y)))
    f = mean[..., None] + np.sqrt(var)[..., None] * rng.normal(size=mean.shape + (SAMPLES,))
    draws = log_density(f, y, link).sum(0)
    reference, error = draws.mean(), draws.std() / np.sqrt(SAMPLES)
    assert np.isfinite(value)
    assert abs(value - reference) < Z_SCORE * error + rule_error * abs(reference)
