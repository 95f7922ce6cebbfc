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

import warnings

import numpy as np
import torch

from gpexplain.functionals.terms import sum_terms
from gpexplain.kernels import RBF
from gpexplain.models._se_likelihood import LOG_BOUNDS
from gpexplain.posterior.exact import with_jitter
from gpexplain.posterior.multi_output import CoregionalizedPosterior

__all__ = ["Standardised", "Term", "fit_icm"]


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
    data = Standardised(X, Y, "an ICM")
    term = data.first_term(rank)
    lml = data.maximise([term], max_iter)
    with torch.no_grad():
        B, lengthscale = data.term_in_units(term)
    posterior = CoregionalizedPosterior(
        data.augmented_inputs(), data.tasks, data.augmented_targets(), RBF(lengthscale, 1.0),
        B, data.noise_in_units(), mean=data.y_mean, output_names=output_names,
        feature_names=names,
    )
    return posterior, lml


class Term:
    """One coregionalised term's parameters (standardised units): unbounded log
    lengthscales, W (t x r) and log v, as leaf tensors the optimiser moves."""

    def __init__(self, log_lengthscale, W, log_v):
        self.raw_lengthscale = _unbounded(log_lengthscale, "lengthscale")
        self.W = torch.tensor(np.asarray(W, dtype=np.float64).copy(), dtype=torch.float64,
                              requires_grad=True)
        self.log_v = torch.tensor(np.asarray(log_v, dtype=np.float64), requires_grad=True)

    @property
    def parameters(self) -> list[torch.Tensor]:
        return [self.raw_lengthscale, self.W, self.log_v]

    def coregionalization(self) -> torch.Tensor:
        return self.W @ self.W.T + torch.diag(self.log_v.exp())

    def gram(self, Xs: torch.Tensor) -> torch.Tensor:
        """``B kron k(X, X)`` (task-major), k the unit ARD squared exponential."""
        scaled = Xs / _bounded(self.raw_lengthscale, "lengthscale").exp()
        # Squared distances without the square root of torch.cdist, whose gradient at a zero
        # distance (a repeated row) is NaN and made the whole optimisation NaN.
        norms = scaled.pow(2).sum(1)
        squared = (norms[:, None] + norms[None, :] - 2 * scaled @ scaled.T).clamp_min(0)
        K = torch.exp(-0.5 * squared)
        return torch.kron(self.coregionalization(), K)


class Standardised:
    """The data of a coregionalised fit on standardised inputs and per-column standardised
    targets, its noise parameters, and the exact log marginal likelihood of a sum of terms.

    Raises
    ------
    ValueError
        Fewer than 2 outputs (``what`` names the model).
    """

    def __init__(self, X: np.ndarray, Y: np.ndarray, what: str):
        n, t = Y.shape
        if t < 2:
            raise ValueError(f"{what} needs a y of at least 2 columns (outputs).")
        self.n, self.t, self.X, self.Y = n, t, X, Y
        self.x_mean, x_scale = X.mean(0), X.std(0)
        self.x_scale = np.where(x_scale > 0, x_scale, 1.0)
        self.y_mean, y_scale = Y.mean(0), Y.std(0)
        self.y_scale = np.where(y_scale > 0, y_scale, 1.0)
        self.Xs = torch.as_tensor((X - self.x_mean) / self.x_scale)
        self.ys = torch.as_tensor(((Y - self.y_mean) / self.y_scale).T.reshape(-1))  # task-major
        self.tasks = np.repeat(np.arange(t), n)
        self.raw_noise = _unbounded(np.full(t, np.log(0.1)), "noise")

    def first_term(self, rank: int | None) -> Term:
        """Lengthscales 1, W the first ``rank`` columns of the Cholesky factor of 0.9 times
        the empirical correlation plus 0.1 I, v = 0.1."""
        n, t = self.n, self.t
        correlation = (np.corrcoef(((self.Y - self.y_mean) / self.y_scale).T) if n > 1
                       else np.eye(t))
        factor = np.linalg.cholesky(0.9 * np.nan_to_num(correlation) + 0.1 * np.eye(t))
        return Term(np.zeros(self.X.shape[1]), factor[:, :t if rank is None else rank],
                    np.full(t, np.log(0.1)))

    def negative_lml(self, terms) -> torch.Tensor:
        """``-log N(y | 0, sum_q B^q kron k_q(X, X) + diag(noise))`` (standardised units)."""
        gram = sum_terms(term.gram(self.Xs) for term in terms)
        noise = _bounded(self.raw_noise, "noise").exp().repeat_interleave(self.n)
        gram = gram + torch.diag(noise)
        L = _cholesky(gram)
        alpha = torch.cholesky_solve(self.ys[:, None], L)[:, 0]
        return 0.5 * self.ys @ alpha + torch.log(torch.diagonal(L)).sum() + 0.5 * len(
            self.ys) * np.log(2 * np.pi)

    def maximise(self, terms, max_iter: int) -> float:
        """L-BFGS (strong Wolfe) over the terms' parameters and the noise; the final LML."""
        parameters = [p for term in terms for p in term.parameters] + [self.raw_noise]
        optimizer = torch.optim.LBFGS(parameters, max_iter=max_iter,
                                      line_search_fn="strong_wolfe")

        def closure():
            optimizer.zero_grad()
            value = self.negative_lml(terms)
            value.backward()
            return value

        optimizer.step(closure)
        with torch.no_grad():
            return -float(self.negative_lml(terms))

    def term_in_units(self, term: Term) -> tuple[np.ndarray, np.ndarray]:
        """``B_orig = S B S`` (S the column standard deviations) and the lengthscales times
        the column scales of X."""
        B = term.coregionalization().numpy()
        lengthscale = _bounded(term.raw_lengthscale, "lengthscale").exp().numpy() * self.x_scale
        return B * np.outer(self.y_scale, self.y_scale), lengthscale

    def noise_in_units(self) -> np.ndarray:
        """Per augmented row, ``noise_i s_i^2``."""
        with torch.no_grad():
            noise = _bounded(self.raw_noise, "noise").exp().numpy()
        return (noise * self.y_scale**2)[self.tasks]

    def augmented_inputs(self) -> np.ndarray:
        return np.tile(self.X, (self.t, 1))

    def augmented_targets(self) -> np.ndarray:
        return self.Y.T.reshape(-1)


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
    """Lower Cholesky factor of ``gram`` (differentiable), with the library's jitter schedule
    (``posterior.exact.with_jitter``) where it is not numerically positive definite: a line
    search may try B >> noise with a kernel matrix whose rounding leaves it indefinite (a
    40-row fit failed with torch's ``_LinAlgError``). Its warning is silenced, as the
    optimiser's trial points are not results; the posterior built at the optimum warns if it
    needs jitter itself."""

    def attempt(jitter: float):
        # The jittered copy only when needed: every objective evaluation calls this.
        jittered = gram + torch.diag(gram.new_full((len(gram),), jitter)) if jitter else gram
        factor, info = torch.linalg.cholesky_ex(jittered)
        return factor if int(info) == 0 else None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return with_jitter(attempt, float(gram.diagonal().mean().detach()))[0]
