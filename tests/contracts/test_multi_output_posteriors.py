"""The contract every multi-output posterior satisfies (``gpexplain.posterior.multi_output``).

Run over the cases of ``tests/contracts/_multi_output.py``; every ``MultiOutputPosterior``
class exported by ``gpexplain.posterior`` must be built by some case. Each output's marginal
passes the single-output posterior contract in ``test_posteriors.py``. Checked here:

* the joint prediction's mean is that of the model that built it (its ``predict``) and its
  columns, means and variances, are the marginals' predictions;
* the covariance across outputs at each point is symmetric and positive semi-definite with the
  marginal variances on its diagonal; zero off the diagonal (stated, not computed) for
  independent outputs; for the directly built ICM, equal to the NumPy covariance;
* outputs are chosen by name or position alike, unknown ones refused by name;
* an explanation of output i (integrated gradients, global sensitivity) is that of its
  marginal (global sensitivity of an LMC is refused by name: not built);
* ``gx.save`` / ``gx.load`` give a posterior with bit-identical predictions.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpexplain as gx
import gpexplain.posterior
from gpexplain.posterior import MultiOutputPosterior, Posterior
from gpexplain.posterior.base import PosteriorProtocol
from tests.contracts._multi_output import CASES, case, queries

NAMES = sorted(CASES)


def test_every_multi_output_posterior_class_has_a_case():
    exported = [getattr(gpexplain.posterior, name) for name in gpexplain.posterior.__all__]
    classes = [cls for cls in exported if isinstance(cls, type)
               and issubclass(cls, MultiOutputPosterior) and cls is not MultiOutputPosterior]
    assert len(classes) >= 2, classes
    covered = {type(case(name)[0]) for name in CASES}
    missing = [cls.__name__ for cls in classes if cls not in covered]
    assert not missing, f"multi-output posterior classes no contract case builds: {missing}"


@pytest.mark.parametrize("name", NAMES)
def test_joint_predictions_are_the_models_and_the_marginals(name):
    posterior, predict, _ = case(name)
    Xq = queries(posterior)
    mean, var = posterior.predict(Xq)
    t = posterior.n_outputs
    assert mean.shape == var.shape == (len(Xq), t)
    expected = predict(Xq)
    np.testing.assert_allclose(mean, expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    np.testing.assert_array_equal(posterior.predict_mean(Xq), mean)
    for i in range(t):
        marginal = posterior.marginal(i)
        assert isinstance(marginal, Posterior) and isinstance(marginal, PosteriorProtocol)
        assert marginal.feature_names == posterior.feature_names
        marginal_mean, marginal_var = marginal.predict(Xq)
        np.testing.assert_array_equal(mean[:, i], marginal_mean)
        np.testing.assert_array_equal(var[:, i], marginal_var)


@pytest.mark.parametrize("name", NAMES)
def test_covariance_across_outputs_is_psd_with_the_marginal_variances(name):
    posterior, _, reference_cov = case(name)
    Xq = queries(posterior)
    _, var = posterior.predict(Xq)
    mean, cov = posterior.predict(Xq, return_cov=True)
    t = posterior.n_outputs
    assert cov.shape == (len(Xq), t, t)
    np.testing.assert_array_equal(cov, np.swapaxes(cov, 1, 2))
    scale = np.abs(cov).max()
    np.testing.assert_allclose(np.diagonal(cov, axis1=1, axis2=2), var, rtol=0,
                               atol=1e-10 * scale)
    assert np.linalg.eigvalsh(cov).min() >= -1e-10 * scale
    off_diagonal = ~np.eye(t, dtype=bool)
    if posterior.independent:
        assert np.all(cov[:, off_diagonal] == 0.0)
    else:
        assert np.abs(cov[:, off_diagonal]).max() > 1e-3 * scale  # correlated outputs
    if reference_cov is not None:
        np.testing.assert_allclose(cov, reference_cov(Xq), rtol=0, atol=1e-9 * scale)


@pytest.mark.parametrize("name", NAMES)
def test_outputs_are_chosen_by_name_or_position(name):
    posterior = case(name)[0]
    names = posterior.output_names
    assert posterior.output_index(None) == list(range(len(names)))
    assert posterior.output_index(names[::-1]) == list(range(len(names)))[::-1]
    assert posterior.marginal(names[1]) is posterior.marginal(1) or np.array_equal(
        posterior.marginal(names[1]).alpha, posterior.marginal(1).alpha)
    with pytest.raises(ValueError, match="unknown output 'nowhere'"):
        posterior.output_index("nowhere")
    with pytest.raises(ValueError, match="out of range"):
        posterior.marginal(len(names))


@pytest.mark.parametrize("name", NAMES)
def test_explanations_of_an_output_are_those_of_its_marginal(name):
    posterior = case(name)[0]
    Xq = queries(posterior)[:3]
    baseline = posterior.data_inputs.mean(0)
    joint = gx.integrated_gradients(posterior, Xq, baseline=baseline)
    sensitivity = gx.global_sensitivity(posterior)
    measure = gx.measures.Gaussian(posterior.data_inputs.mean(0), posterior.data_inputs.std(0))
    for i, output in enumerate(posterior.output_names):
        alone = gx.integrated_gradients(posterior.marginal(i), Xq, baseline=baseline)
        np.testing.assert_allclose(joint[output].mean, alone.mean, rtol=0,
                                   atol=1e-10 * np.abs(alone.mean).max())
        np.testing.assert_allclose(joint.output_cov(i, i), alone.cov, rtol=0,
                                   atol=1e-10 * np.abs(alone.cov).max())
        single = gx.global_sensitivity(posterior.marginal(i), measure)
        np.testing.assert_allclose(sensitivity[output].shapley_effects, single.shapley_effects,
                                   rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("name", NAMES)
def test_save_and_load_keep_the_predictions(name, tmp_path):
    posterior = case(name)[0]
    Xq = queries(posterior)
    gx.save(posterior, tmp_path / "posterior")
    loaded = gx.load(tmp_path / "posterior")
    assert type(loaded) is type(posterior) and loaded.output_names == posterior.output_names
    for got, expected in zip(loaded.predict(Xq, return_cov=True),
                             posterior.predict(Xq, return_cov=True), strict=True):
        np.testing.assert_array_equal(got, expected)
