"""The contract every classifier link satisfies: its Gaussian expectation against Monte Carlo.

For every link registered in ``gpexplain.links.LINKS`` and latent moments from narrow to
wide, ``expected_response(mean, var)`` (inputs (n, C): elementwise for a
binary link, over the class axis for the softmax) is

* the Monte Carlo average of the response written here (``RESPONSES``: scipy's ``expit``,
  ``ndtr``, ``softmax``, no code shared with the library) over 200,000 draws of
  ``f ~ N(mean, diag(var))``, within 5 standard errors (estimated from the draws), plus 1e-12;
* the plug-in response ``sigma(mean)`` at zero variance (to 1e-12);
* a probability, in [0, 1].

An unknown link name is refused with an error listing every link.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, ndtr, softmax

from gpexplain import links

LINK_ENTRIES = tuple(links.LINKS.items())

# The response of each link, written independently of the library: (f (..., C)) -> (..., C).
RESPONSES = {
    "logit": expit,
    "probit": ndtr,
    "softmax": lambda f: softmax(f, axis=-1),
}
N_DRAWS = 200_000
Z_SCORE = 5.0
MEAN = np.array([[0.3, -1.2, 2.0], [-0.5, 0.1, 0.4]])
VAR = np.array([[0.05, 0.8, 2.5], [9.0, 0.3, 1.2]])  # narrow (Gauss-Hermite) to wide


def _ids():
    return [name for name, _ in LINK_ENTRIES]


def test_every_link_has_a_reference_response():
    assert LINK_ENTRIES, "no links"
    missing = [name for name, _ in LINK_ENTRIES if name not in RESPONSES]
    assert not missing, f"links without a reference response here: {missing}"


@pytest.mark.parametrize("name, link_class", LINK_ENTRIES, ids=_ids())
def test_expected_response_matches_monte_carlo(name, link_class):
    value = link_class().expected_response(MEAN, VAR)
    assert value.shape == MEAN.shape and np.all(np.isfinite(value))
    assert np.all((value >= 0.0) & (value <= 1.0))
    draws = MEAN + np.sqrt(VAR) * np.random.default_rng(17).standard_normal((N_DRAWS, *MEAN.shape))
    responses = RESPONSES[name](draws)
    estimate = responses.mean(axis=0)
    standard_error = responses.std(axis=0) / np.sqrt(N_DRAWS)
    gap = np.abs(value - estimate)
    assert np.all(gap <= Z_SCORE * standard_error + 1e-12), (gap / standard_error).max()


@pytest.mark.parametrize("name, link_class", LINK_ENTRIES, ids=_ids())
def test_zero_variance_is_the_plug_in_response(name, link_class):
    value = link_class().expected_response(MEAN, np.zeros_like(VAR))
    np.testing.assert_allclose(value, RESPONSES[name](MEAN), rtol=0, atol=1e-12)


def test_an_unknown_link_lists_every_link():
    with pytest.raises(ValueError) as raised:
        links.get_link("no-such-link")
    for name, _ in LINK_ENTRIES:
        assert repr(name) in str(raised.value), name
