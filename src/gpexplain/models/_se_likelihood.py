"""The exact log marginal likelihood of a constant-mean GP with a squared-exponential kernel,
its analytic gradient, and its maximisation by L-BFGS-B (scipy).

The squared exponential is the default kernel of ``GPRegressor``; fitting it through
GPyTorch's generic autograd path cost 3.6 times scikit-learn's time. Here one evaluation is
one Cholesky factorisation and one inverse from it (LAPACK ``potrf`` + ``potri``, about
``n^3`` flops in float64) plus ``O(n^2 D)`` for the gradient, with no graph to record.

Model (standardised units): ``y ~ N(m 1, K)``, ``K = s2_f exp(-0.5 sum_d (x_d - x'_d)^2 /
l_d^2) + s2_n I``. With ``r = y - m 1``, ``alpha = K^{-1} r`` (Rasmussen and Williams,
*Gaussian Processes for Machine Learning*, 2006, eqs. 2.30 and 5.9):

    -log p(y)        = r^T alpha / 2 + sum_i log L_ii + n log(2 pi) / 2
    d(-log p)/d theta = tr((K^{-1} - alpha alpha^T) dK/dtheta) / 2,    d(-log p)/dm = -1^T alpha

in the log parameters ``theta = (log l_1..l_D, log s2_f, log s2_n)``, where, writing
``W = K^{-1} - alpha alpha^T`` and ``M = W o K_f`` (elementwise, ``K_f`` the kernel part),

    dK/dlog s2_f = K_f,   dK/dlog s2_n = s2_n I,
    tr(W dK/dlog l_d) = sum_ij M_ij (x_id - x_jd)^2 / l_d^2
                      = 2 (sum_i x_id^2 (M 1)_i - x_d^T M x_d) / l_d^2     (M symmetric),

so the D lengthscale derivatives cost one (n, n) x (n, D) product instead of D (n, n) arrays.
An isotropic kernel (one lengthscale) sums them.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cho_solve, cholesky
from scipy.linalg.lapack import dpotri
from scipy.optimize import minimize
from scipy.spatial.distance import cdist

from gpexplain.kernels import RBF
from gpexplain.models._fitting import LENGTHSCALE_LOWER_BOUND, NOISE_LOWER_BOUND

__all__ = ["LOG_BOUNDS", "negative_log_marginal_likelihood", "maximise_se_marginal_likelihood"]

# Search box of L-BFGS-B in standardised units: the lower bounds are the GPyTorch path's
# constraints; the upper ones keep exp() finite in line searches (a lengthscale of 1e5 standard
# deviations already switches a feature off; scikit-learn's defaults stop at 1e5 too).
LOG_BOUNDS = {
    "lengthscale": (np.log(LENGTHSCALE_LOWER_BOUND), np.log(1e5)),
    "outputscale": (np.log(1e-6), np.log(1e6)),
    "noise": (np.log(NOISE_LOWER_BOUND), np.log(1e3)),
}


class _NotPositiveDefinite(RuntimeError):
    """K was not positive definite at an evaluated point (ends that start's optimisation)."""


def negative_log_marginal_likelihood(params: np.ndarray, X: np.ndarray, y: np.ndarray):
    """``-log p(y)`` and its gradient at ``params = (log l_1..l_L, log s2_f, log s2_n, m)``.

    Parameters
    ----------
    params : ndarray (L + 3,)
        ``L`` is 1 (isotropic) or D (ARD).
    X : ndarray (n, D), y : ndarray (n,)
        Standardised inputs and targets.

    Returns
    -------
    value : float
    gradient : ndarray (L + 3,)

    Raises
    ------
    _NotPositiveDefinite
        The Cholesky factorisation of K failed (no jitter is added: a jittered value would not
        be the likelihood being maximised).
    """
    n_lengthscales = len(params) - 3
    lengthscale = np.exp(params[:n_lengthscales])
    outputscale, noise, mean = np.exp(params[-3]), np.exp(params[-2]), params[-1]
    scaled = X / lengthscale
    # In place throughout: at n = 2000 each (n, n) temporary costs as much as the Cholesky.
    kernel = cdist(scaled, scaled, "sqeuclidean")
    kernel *= -0.5
    np.exp(kernel, out=kernel)
    kernel *= outputscale
    covariance = kernel.copy()
    covariance.flat[:: len(y) + 1] += noise
    try:
        factor = cholesky(covariance, lower=True, overwrite_a=True, check_finite=False)
    except LinAlgError as error:
        raise _NotPositiveDefinite(str(error)) from error
    residual = y - mean
    alpha = cho_solve((factor, True), residual, check_finite=False)
    value = 0.5 * residual @ alpha + np.log(np.diag(factor)).sum() + 0.5 * len(y) * np.log(
        2 * np.pi
    )
    # potri overwrites the lower triangle with that of K^{-1}; the upper one stays zero.
    W, info = dpotri(factor, lower=1, overwrite_c=1)
    if info != 0:
        raise _NotPositiveDefinite(f"LAPACK dpotri returned {info}")
    W += W.T
    W.flat[:: len(y) + 1] *= 0.5
    trace_inverse = np.trace(W)
    W -= np.outer(alpha, alpha)  # W = K^{-1} - alpha alpha^T
    M = np.multiply(W, kernel, out=kernel)
    row_sums = M.sum(axis=1)
    by_feature = (X**2).T @ row_sums - np.einsum("id,id->d", X, M @ X)  # half the trace terms
    lengthscale_terms = by_feature / lengthscale**2 if n_lengthscales > 1 else np.array(
        [by_feature.sum() / lengthscale[0] ** 2]
    )
    gradient = np.concatenate([
        lengthscale_terms,
        [0.5 * row_sums.sum(), 0.5 * noise * (trace_inverse - alpha @ alpha), -alpha.sum()],
    ])
    return float(value), gradient


def maximise_se_marginal_likelihood(
    Xs, ys, start, max_iter: int, callback, start_index: int, n_starts: int
):
    """Maximise the exact log marginal likelihood of the SE model from one start (L-BFGS-B).

    Parameters
    ----------
    Xs : ndarray (n, D), ys : ndarray (n,)
        Standardised inputs and targets.
    start : (lengthscale (L,), outputscale, noise)
        Standardised units; ``L`` = 1 fits an isotropic kernel.
    max_iter : int
        L-BFGS-B iterations.
    callback : callable(step, total) or None
        Progress over ``n_starts * max_iter`` steps, this being start ``start_index``.

    Returns
    -------
    ((RBF, noise, constant mean), stopped_early) in standardised units, or None when the first
    evaluation already failed. ``stopped_early``: K was not positive definite at a point the
    line search tried, and the best point evaluated before is returned.
    """
    lengthscale, outputscale, noise = start
    lower, upper = zip(
        *([LOG_BOUNDS["lengthscale"]] * len(lengthscale)
          + [LOG_BOUNDS["outputscale"], LOG_BOUNDS["noise"], (None, None)]),
        strict=True,
    )
    initial = np.clip(
        np.concatenate([np.log(lengthscale), [np.log(outputscale), np.log(noise), 0.0]]),
        [-np.inf if b is None else b for b in lower],
        [np.inf if b is None else b for b in upper],
    )
    best = {"value": np.inf}
    evaluations = [0]

    def objective(params):
        value, gradient = negative_log_marginal_likelihood(params, Xs, ys)
        evaluations[0] += 1
        if value < best["value"]:
            best.update(value=value, params=params.copy())
        if callback is not None:
            callback(start_index * max_iter + min(evaluations[0], max_iter), n_starts * max_iter)
        return value, gradient

    stopped_early = False
    try:
        minimize(
            objective, initial, jac=True, method="L-BFGS-B",
            bounds=list(zip(lower, upper, strict=True)), options={"maxiter": max_iter},
        )
    except _NotPositiveDefinite:
        if "params" not in best:
            return None
        stopped_early = True
    params = best["params"]
    if not np.all(np.isfinite(params)):
        return None
    fitted_lengthscale = np.exp(params[:-3])
    kernel = RBF(
        fitted_lengthscale if len(fitted_lengthscale) > 1 else float(fitted_lengthscale[0]),
        float(np.exp(params[-3])),
    )
    return (kernel, float(np.exp(params[-2])), float(params[-1])), stopped_early
