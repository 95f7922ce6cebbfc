"""Fitting an intrinsic coregionalisation model (ICM) to a 2-D y (``GPRegressor(multi_output=
"icm")``, issue 24).

Model (Bonilla, Chai and Williams, *Multi-task Gaussian process prediction*, 2008), on
standardised inputs and per-column standardised targets:

    f_i ~ GP with Cov[f_i(x), f_j(x')] = B_ij k(x, x'),   k = ARD squared exponential (variance 1)
    B = W W^T + diag(v)   (W: t x r, r = rank <= t; v > 0)
    y_ni = f_i(x_n) + eps_ni,   eps_ni ~ N(0, noise_i)   (every output observed at every row)

The log marginal likelihood of the n t observations, ``K = B kron k(X, X) + diag(noise)``
(task-major), is maximised over (log lengthscales, W, log v, log noise) by torch's L-BFGS
(strong Wolfe) in float64 from one start (lengthscales 1, W the first r columns of the
Cholesky factor of 0.9 times the empirical correlation of the standardised columns plus 0.1 I,
v = 0.1, noise 0.1). The log lengthscales and log
noises stay in the single-output fit's box (``_se_likelihood.LOG_BOUNDS``, through a
sigmoid): unbounded, a 40-row fit drove lengthscales to 1e27 and the noise to zero. The result
in the original units is a ``CoregionalizedPosterior`` with ``B_orig = S B S`` (S the column
standard deviations), lengthscales times the column scales of X, noise ``noise_i s_i^2`` and
means the column means.
"""

from __future__ import annotations

import numpy as np
import torch

from gpexplain.kernels import RBF
from gpexplain.models._se_likelihood import LOG_BOUNDS
from gpexplain.posterior.multi_output import CoregionalizedPosterior

__all__ = ["fit_icm"]


def fit_icm(X: np.ndarray, Y: np.ndarray, names, output_names, max_iter: int,
            rank: int | None = None):
    """Fit the ICM of the module docstring; return ``(posterior, log marginal likelihood)``.

    Parameters
    ----------
    X : ndarray (n, d), float64
    Y : ndarray (n, t), float64, finite
    names, output_names : list of str
    max_iter : int
        L-BFGS iterations.
    rank : int, optional
        Columns of W (default t).

    Raises
    ------
    ValueError
        Fewer than 2 outputs.
    """
    n, t = Y.shape
    if t < 2:
        raise ValueError("an ICM needs a y of at least 2 columns (outputs).")
    x_mean, x_scale = X.mean(0), X.std(0)
    x_scale = np.where(x_scale > 0, x_scale, 1.0)
    y_mean, y_scale = Y.mean(0), Y.std(0)
    y_scale = np.where(y_scale > 0, y_scale, 1.0)
    Xs = torch.as_tensor((X - x_mean) / x_scale)
    ys = torch.as_tensor(((Y - y_mean) / y_scale).T.reshape(-1))  # task-major
    correlation = np.corrcoef(((Y - y_mean) / y_scale).T) if n > 1 else np.eye(t)
    factor = np.linalg.cholesky(0.9 * np.nan_to_num(correlation) + 0.1 * np.eye(t))
    raw_lengthscale = _unbounded(np.zeros(X.shape[1]), "lengthscale")
    W = torch.tensor(factor[:, :t if rank is None else rank].copy(), dtype=torch.float64,
                     requires_grad=True)
    log_v = torch.full((t,), np.log(0.1), dtype=torch.float64, requires_grad=True)
    raw_noise = _unbounded(np.full(t, np.log(0.1)), "noise")
    parameters = [raw_lengthscale, W, log_v, raw_noise]

    def negative_lml():
        scaled = Xs / _bounded(raw_lengthscale, "lengthscale").exp()
        # Squared distances without the square root of torch.cdist, whose gradient at a zero
        # distance (a repeated row) is NaN and made the whole optimisation NaN.
        norms = scaled.pow(2).sum(1)
        squared = (norms[:, None] + norms[None, :] - 2 * scaled @ scaled.T).clamp_min(0)
        K = torch.exp(-0.5 * squared)
        B = W @ W.T + torch.diag(log_v.exp())
        noise = _bounded(raw_noise, "noise").exp().repeat_interleave(n)
        gram = torch.kron(B, K) + torch.diag(noise)
        L = _cholesky(gram)
        alpha = torch.cholesky_solve(ys[:, None], L)[:, 0]
        return 0.5 * ys @ alpha + torch.log(torch.diagonal(L)).sum() + 0.5 * len(ys) * np.log(
            2 * np.pi)

    optimizer = torch.optim.LBFGS(parameters, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        value = negative_lml()
        value.backward()
        return value

    optimizer.step(closure)
    with torch.no_grad():
        lml = -float(negative_lml())
        B = (W @ W.T + torch.diag(log_v.exp())).numpy()
        lengthscale = _bounded(raw_lengthscale, "lengthscale").exp().numpy() * x_scale
        noise = _bounded(raw_noise, "noise").exp().numpy()
    tasks = np.repeat(np.arange(t), n)
    posterior = CoregionalizedPosterior(
        np.tile(X, (t, 1)), tasks, Y.T.reshape(-1), RBF(lengthscale, 1.0),
        B * np.outer(y_scale, y_scale), (noise * y_scale**2)[tasks], mean=y_mean,
        output_names=output_names, feature_names=names,
    )
    return posterior, lml


def _bounded(raw: torch.Tensor, name: str) -> torch.Tensor:
    """A log hyperparameter inside ``LOG_BOUNDS[name]`` from an unbounded one (sigmoid)."""
    low, high = LOG_BOUNDS[name]
    return low + (high - low) * torch.sigmoid(raw)


def _unbounded(log_value: np.ndarray, name: str) -> torch.Tensor:
    """The unbounded parameter whose ``_bounded`` value is ``log_value`` (a leaf tensor)."""
    low, high = LOG_BOUNDS[name]
    fraction = (np.asarray(log_value, dtype=np.float64) - low) / (high - low)
    return torch.tensor(np.log(fraction / (1 - fraction)), requires_grad=True)


def _cholesky(gram: torch.Tensor) -> torch.Tensor:
    """Lower Cholesky factor of ``gram``, adding 1e-10 to 1e-4 times its mean diagonal where
    it is not numerically positive definite: a line search may try B >> noise with a kernel
    matrix whose rounding leaves it indefinite (a 40-row fit failed with torch's
    ``_LinAlgError``). Silent, as the optimiser's trial points are not results; the posterior
    built at the optimum says so if it needs jitter (``cholesky_with_jitter``)."""
    factor, info = torch.linalg.cholesky_ex(gram)
    scale = gram.diagonal().mean().detach()
    for relative in (1e-10, 1e-8, 1e-6, 1e-4):
        if int(info) == 0:
            break
        eye = torch.eye(len(gram), dtype=gram.dtype)
        factor, info = torch.linalg.cholesky_ex(gram + relative * scale * eye)
    if int(info) != 0:
        raise np.linalg.LinAlgError(
            "the ICM's kernel matrix is not positive definite even with jitter 1e-4 times its "
            "mean diagonal during the fit; standardise or deduplicate the rows, or fit "
            "multi_output='independent'.")
    return factor
