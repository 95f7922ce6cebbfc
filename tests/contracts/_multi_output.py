"""The multi-output posteriors the contracts run over, each with the predictions of what built
it (``tests/contracts/test_multi_output_posteriors.py``; their marginals also run the
single-output posterior contract in ``test_posteriors.py``).

Cases: every ``multi_output`` form of every model family that fits several targets (read from
``FAMILIES``, so a new form is a case the moment it is declared), scikit-learn's
``GaussianProcessRegressor`` on a 2-D y through ``gx.as_multi_output``, and a
``CoregionalizedPosterior`` and a two-term ``LMCPosterior`` built directly on tasks observed at
different inputs, whose joint
mean and covariance across outputs are computed here with NumPy (explicit inverse of the
task-augmented kernel matrix).
"""

from __future__ import annotations

import functools

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

import gpexplain as gx
from gpexplain.models.families import FAMILIES
from tests.contracts._models import regression_data, small
from tests.reference.icm_marginal import squared_exponential

OUTPUT_NAMES = ["first", "second"]


def multi_output_data():
    """``X`` (30, 2) and two correlated targets ``Y`` (30, 2) on different scales."""
    X, y = regression_data()
    return X, np.c_[y, 50.0 - 8.0 * y + 2.0 * X[:, 1]]


def _from_family(cls, form):
    X, Y = multi_output_data()
    model = small(cls, multi_output=form).fit(X, Y)
    return model.posterior_, model.predict, None


def _from_sklearn():
    X, Y = multi_output_data()
    kernel = ConstantKernel(1.0) * RBF(np.ones(X.shape[1])) + WhiteKernel(0.1)
    model = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(X, Y)
    return gx.as_multi_output(model, output_names=OUTPUT_NAMES), model.predict, None


LENGTHSCALE, VARIANCE = np.array([0.8, 1.3]), 1.7
B = np.array([[1.0, -0.7], [-0.7, 2.5]])
MEANS, NOISE = np.array([0.3, -1.0]), np.array([0.05, 0.2])


def _direct_icm():
    """Tasks at different inputs (24 rows of the first, 12 of the second), per-task noise."""
    X, Y = multi_output_data()
    Z = np.vstack([X[:24], X[18:]])
    tasks = np.r_[np.zeros(24, dtype=int), np.ones(12, dtype=int)]
    y = np.r_[Y[:24, 0], Y[18:, 1]]
    posterior = gx.CoregionalizedPosterior(
        Z, tasks, y, gx.kernels.RBF(LENGTHSCALE, VARIANCE), B, NOISE[tasks], mean=MEANS,
        output_names=OUTPUT_NAMES)
    K = B[np.ix_(tasks, tasks)] * squared_exponential(Z, Z, LENGTHSCALE, VARIANCE)
    inverse = np.linalg.inv(K + np.diag(NOISE[tasks]))

    def moments(Xq):
        """NumPy mean (n, 2) and covariance across outputs (n, 2, 2) at each point."""
        cross = squared_exponential(Xq, Z, LENGTHSCALE, VARIANCE)[:, None, :] * B[:, tasks]
        mean = MEANS + cross @ (inverse @ (y - MEANS[tasks]))
        cov = VARIANCE * B - np.einsum("pin,nm,pjm->pij", cross, inverse, cross)
        return mean, cov

    return posterior, lambda Xq: moments(Xq)[0], lambda Xq: moments(Xq)[1]


LMC_LENGTHSCALES = [np.array([0.5, 2.0]), np.array([2.5, 0.7])]
LMC_B = [np.array([[1.0, 0.6], [0.6, 0.5]]), np.array([[0.3, -0.4], [-0.4, 1.2]])]


def _direct_lmc():
    """A two-term LMC (different ARD lengthscales per term) on tasks at different inputs;
    NumPy moments from sum_q B^q[i, j] k_q by explicit inverse."""
    X, Y = multi_output_data()
    Z = np.vstack([X[:20], X[14:]])
    tasks = np.r_[np.zeros(20, dtype=int), np.ones(16, dtype=int)]
    y = np.r_[Y[:20, 0], Y[14:, 1]]
    posterior = gx.LMCPosterior(
        Z, tasks, y, [gx.kernels.RBF(ls, 1.0) for ls in LMC_LENGTHSCALES], LMC_B,
        NOISE[tasks], mean=MEANS, output_names=OUTPUT_NAMES)
    K = sum(B[np.ix_(tasks, tasks)] * squared_exponential(Z, Z, ls, 1.0)
            for ls, B in zip(LMC_LENGTHSCALES, LMC_B, strict=True))
    inverse = np.linalg.inv(K + np.diag(NOISE[tasks]))

    def moments(Xq):
        cross = sum(squared_exponential(Xq, Z, ls, 1.0)[:, None, :] * B[:, tasks]
                    for ls, B in zip(LMC_LENGTHSCALES, LMC_B, strict=True))
        mean = MEANS + cross @ (inverse @ (y - MEANS[tasks]))
        cov = sum(LMC_B) - np.einsum("pin,nm,pjm->pij", cross, inverse, cross)
        return mean, cov

    return posterior, lambda Xq: moments(Xq)[0], lambda Xq: moments(Xq)[1]


# name -> builder of (posterior, its builder's mean predictions (n, t), NumPy covariance
# across outputs at each point (n, t, t) or None)
CASES = {
    **{f"{entry.estimator.__name__}(multi_output={form!r})":
       functools.partial(_from_family, entry.estimator, form)
       for _, entry in FAMILIES.items() for form in entry.multi_output},
    "as_multi_output(GaussianProcessRegressor)": _from_sklearn,
    "CoregionalizedPosterior(tasks at different inputs)": _direct_icm,
    "LMCPosterior(two terms, tasks at different inputs)": _direct_lmc,
}


@functools.cache
def case(name):
    return CASES[name]()


def queries(posterior) -> np.ndarray:
    """Training inputs and new points near them."""
    Z = posterior.data_inputs[:5]
    return np.vstack([Z, Z + np.random.default_rng(5).normal(scale=0.4, size=Z.shape)])
