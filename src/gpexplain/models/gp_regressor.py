"""``GPRegressor``: exact GP regression fitted with GPyTorch, explained in closed form.

The estimator standardises X and y, fits the hyperparameters of a constant-mean GP with a
squared-exponential kernel (ARD or isotropic, with an output scale) and Gaussian noise by
maximising the log marginal likelihood with L-BFGS from a few seeded starting points, and
exposes the result as an ``ExactPosterior`` in the *original* units of X and y. The ARD-SE
kernel on standardised inputs is exactly an ARD-SE kernel on the original inputs with
lengthscales multiplied by the column scales, so nothing is approximated by the conversion.
"""

from __future__ import annotations

import warnings

import gpytorch
import numpy as np
import torch
from linear_operator.utils.warnings import NumericalWarning
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from gpexplain._validation import as_feature_matrix, as_target
from gpexplain.kernels import RBF
from gpexplain.posterior import ExactPosterior

__all__ = ["FitError", "GPRegressor"]

KERNELS = ("ard", "isotropic")
OPTIMIZERS = ("lbfgs", None)
_NOISE_LOWER_BOUND = 1e-6  # in standardised units, below scikit-learn's WhiteKernel bound 1e-5
_DEFAULT_NOISE = 0.1  # standardised units, for the first start
# Lengthscales below 1e-4 standard deviations only fit noise and make duplicated rows
# numerically singular; bounding them keeps L-BFGS out of that degenerate corner.
_LENGTHSCALE_LOWER_BOUND = 1e-4


class FitError(RuntimeError):
    """Hyperparameter optimisation failed from every starting point."""


class GPRegressor(RegressorMixin, BaseEstimator):
    """Exact Gaussian-process regression with a squared-exponential kernel.

    Model: ``y = f(x) + eps``, ``f ~ GP(m0, k)``, ``k(x, x') = variance * exp(-0.5 * sum_i
    (x_i - x'_i)^2 / lengthscale_i^2)``, ``eps ~ N(0, noise)``. Hyperparameters maximise the
    log marginal likelihood (L-BFGS, strong Wolfe line search, GPyTorch exact GP in float64
    with Cholesky forced at every size).

    Parameters
    ----------
    kernel : {"ard", "isotropic"} or gx.kernels.RBF, default "ard"
        ``"ard"``: one lengthscale per feature; ``"isotropic"``: one lengthscale for the
        standardised features (hence per-feature lengthscales proportional to the column
        standard deviations in original units). An ``RBF`` instance (original units) is the
        first starting point, or the final kernel when ``optimizer=None``; a vector
        lengthscale means ARD.
    noise : float, optional
        Noise variance in squared units of y: first starting point (or the final value when
        ``optimizer=None``). Default: 0.1 times the variance of y.
    n_restarts : int, default 3
        Additional seeded random starting points after the first.
    optimizer : {"lbfgs", None}, default "lbfgs"
        None keeps the given hyperparameters (``kernel`` must then be an ``RBF`` instance).
    max_iter : int, default 200
        L-BFGS iterations per start.
    random_state : int, default 0
        Seed of the random starting points.

    Attributes
    ----------
    posterior_ : ExactPosterior
        Posterior in original units; what explanations consume.
    kernel_ : RBF
        Fitted kernel in original units; lengthscale ``np.inf`` for constant columns.
    noise_ : float
        Fitted noise variance (squared units of y).
    mean_ : float
        Fitted constant prior mean (units of y).
    log_marginal_likelihood_value_ : float
        Optimum on the standardised targets (scikit-learn's ``normalize_y=True`` convention),
        over the distinct rows (exact duplicate rows are fitted once, with a warning).
    restarts_ : list of dict
        Log marginal likelihood reached from each starting point.
    constant_features_ : list of str
        Columns that were constant in the training data; the kernel ignores them, so their
        attributions are exactly zero.
    feature_names_in_ : list of str
    n_features_in_ : int

    Raises
    ------
    ValueError, TypeError
        From ``fit``: bad inputs (named column/row), fewer than 2 rows, all columns constant,
        unknown kernel or optimizer.
    FitError
        From ``fit``: the optimiser failed from every starting point.
    """

    def __init__(
        self,
        kernel="ard",
        noise: float | None = None,
        n_restarts: int = 3,
        optimizer: str | None = "lbfgs",
        max_iter: int = 200,
        random_state: int = 0,
    ):
        self.kernel = kernel
        self.noise = noise
        self.n_restarts = n_restarts
        self.optimizer = optimizer
        self.max_iter = max_iter
        self.random_state = random_state

    # -- fitting ------------------------------------------------------------------------
    def _check_params(self) -> bool:
        """Validate constructor arguments; return whether the kernel is ARD."""
        if isinstance(self.kernel, RBF):
            # A scalar lengthscale in original units is per-feature on standardised inputs:
            # kept exactly when not optimised, tied (isotropic) when optimised.
            ard = self.kernel.ard or self.optimizer is None
        elif self.kernel in KERNELS:
            ard = self.kernel == "ard"
        else:
            raise ValueError(
                f"unknown kernel {self.kernel!r}; use one of {KERNELS} or a gx.kernels.RBF."
            )
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; use 'lbfgs' or None.")
        if self.optimizer is None and not isinstance(self.kernel, RBF):
            raise ValueError("optimizer=None needs kernel=gx.kernels.RBF(...) with its values.")
        if not isinstance(self.n_restarts, int | np.integer) or self.n_restarts < 0:
            raise ValueError(f"n_restarts must be an integer >= 0, got {self.n_restarts!r}.")
        if not isinstance(self.max_iter, int | np.integer) or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer, got {self.max_iter!r}.")
        if self.noise is not None and not (np.isfinite(self.noise) and self.noise > 0):
            raise ValueError(f"noise must be a positive variance, got {self.noise!r}.")
        return ard

    def _starting_points(self, ard: bool, n_features: int, active, x_scale, y_scale) -> list:
        """Hyperparameters (standardised units) of the first and the random starts."""
        if isinstance(self.kernel, RBF):
            given = self.kernel._lengthscales(n_features)[active] / x_scale
            lengthscale = given if ard else np.array([float(np.exp(np.mean(np.log(given))))])
            outputscale = self.kernel.variance / y_scale**2
        else:
            lengthscale = np.ones(active.size if ard else 1)
            outputscale = 1.0
        noise = _DEFAULT_NOISE if self.noise is None else self.noise / y_scale**2
        starts = [(lengthscale, outputscale, max(noise, 2 * _NOISE_LOWER_BOUND))]
        rng = np.random.default_rng(self.random_state)
        for _ in range(self.n_restarts if self.optimizer else 0):
            starts.append(
                (
                    np.exp(rng.uniform(np.log(0.1), np.log(10.0), size=lengthscale.shape)),
                    float(np.exp(rng.uniform(np.log(0.1), np.log(10.0)))),
                    float(np.exp(rng.uniform(np.log(1e-3), np.log(1.0)))),
                )
            )
        return starts

    def fit(self, X, y, callback=None):
        """Fit the hyperparameters and build the posterior.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NumPy, pandas (column names become feature names) or torch. At least 2 rows.
        y : array-like of shape (n_samples,)
        callback : callable(step, total), optional
            Called as the optimiser progresses (for progress bars).

        Returns
        -------
        self
        """
        ard = self._check_params()
        X, names = as_feature_matrix(X, "X", min_rows=2)
        y = as_target(y, X.shape[0])
        constant = np.ptp(X, axis=0) == 0
        if constant.all():
            raise ValueError("every column of X is constant; there is nothing to learn from.")
        if constant.any():
            warnings.warn(
                "constant column(s) "
                + ", ".join(repr(names[i]) for i in np.flatnonzero(constant))
                + " carry no information; the model ignores them (zero attribution).",
                UserWarning,
                stacklevel=2,
            )
        active = np.flatnonzero(~constant)
        x_mean, x_scale = X[:, active].mean(axis=0), X[:, active].std(axis=0)
        y_mean, y_std = float(y.mean()), float(y.std())
        y_scale = y_std if y_std > 0 else 1.0
        Xs = (X[:, active] - x_mean) / x_scale
        ys = (y - y_mean) / y_scale
        # Rows repeated exactly (features and target) let the marginal likelihood grow
        # without bound as lengthscales and noise shrink (each copy is then predicted
        # perfectly), so the hyperparameters are fitted on the distinct rows only.
        _, distinct = np.unique(np.column_stack([Xs, ys]), axis=0, return_index=True)
        if distinct.size < len(ys):
            warnings.warn(
                f"{len(ys) - distinct.size} row(s) repeat another row exactly (features and "
                f"target); hyperparameters are fitted on the {distinct.size} distinct rows, "
                "the posterior uses all rows.",
                UserWarning,
                stacklevel=2,
            )
            distinct = np.sort(distinct)
            Xs, ys = Xs[distinct], ys[distinct]

        starts = self._starting_points(ard, X.shape[1], active, x_scale, y_scale)
        results, self.restarts_ = [], []
        for index, start in enumerate(starts):
            hyper = (*start, 0.0) if self.optimizer is None else _optimise(
                Xs, ys, start, self.max_iter, callback, index, len(starts)
            )
            lml = None
            if hyper is not None:
                kernel = RBF(hyper[0] if ard else hyper[0][0], hyper[1])
                try:
                    standard = ExactPosterior(Xs, ys, kernel, hyper[2], mean=hyper[3])
                    lml = standard.log_marginal_likelihood()
                except ValueError:  # not positive definite at these hyperparameters
                    pass
            self.restarts_.append({"start": index, "log_marginal_likelihood": lml})
            if lml is not None:
                results.append((lml, hyper))
        if not results:
            raise FitError(
                "hyperparameter optimisation failed from every starting point; try "
                "optimizer=None with a given kernel and noise, or rescale the data."
            )
        best_lml, (lengthscale, outputscale, noise, constant_mean) = max(
            results, key=lambda item: item[0]
        )

        full_lengthscale = np.full(X.shape[1], np.inf)
        full_lengthscale[active] = lengthscale * x_scale  # broadcasts the isotropic scalar
        self.kernel_ = RBF(full_lengthscale, outputscale * y_scale**2)
        self.noise_ = float(noise * y_scale**2)
        self.mean_ = float(y_mean + y_scale * constant_mean)
        self.log_marginal_likelihood_value_ = float(best_lml)
        self.constant_features_ = [names[i] for i in np.flatnonzero(constant)]
        self.feature_names_in_ = list(names)
        self.n_features_in_ = X.shape[1]
        self.posterior_ = ExactPosterior(
            X, y, self.kernel_, self.noise_, mean=self.mean_, feature_names=names
        )
        return self

    # -- prediction ---------------------------------------------------------------------
    def predict(self, X, return_std: bool = False, noisy: bool = False):
        """Posterior predictive mean (and standard deviation) in the units of y.

        Parameters
        ----------
        X : array-like of shape (n_points, n_features)
        return_std : bool
            Also return the standard deviation.
        noisy : bool
            Include the noise variance in the standard deviation (predicting a new
            observation rather than the latent function).

        Returns
        -------
        mean : ndarray (n_points,)
        std : ndarray (n_points,), only with ``return_std=True``
        """
        check_is_fitted(self, "posterior_")
        mean, var = self.posterior_.predict(X)
        if not return_std:
            return mean
        if noisy:
            var = var + self.noise_
        return mean, np.sqrt(var)


def _optimise(Xs, ys, start, max_iter, callback, start_index, n_starts):
    """Maximise the exact log marginal likelihood from one starting point with GPyTorch.

    Returns (lengthscale array, outputscale, noise, constant mean) in standardised units, or
    None when the optimiser produced non-finite values.
    """
    lengthscale, outputscale, noise = start
    X_t = torch.as_tensor(Xs, dtype=torch.float64)
    y_t = torch.as_tensor(ys, dtype=torch.float64)
    likelihood = gpytorch.likelihoods.GaussianLikelihood(
        noise_constraint=gpytorch.constraints.GreaterThan(_NOISE_LOWER_BOUND)
    ).double()
    model = _ExactGPModel(X_t, y_t, likelihood, ard_dims=len(lengthscale)).double()

    model.covar_module.base_kernel.lengthscale = torch.as_tensor(lengthscale)
    model.covar_module.outputscale = torch.tensor(float(outputscale))
    likelihood.noise = torch.tensor(float(noise))
    model.train()
    likelihood.train()
    objective = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    optimizer = torch.optim.LBFGS(
        model.parameters(),
        lr=1.0,
        max_iter=max_iter,
        line_search_fn="strong_wolfe",
        tolerance_grad=1e-5,
        tolerance_change=1e-9,
        history_size=20,
    )
    evaluations = [0]

    def closure():
        optimizer.zero_grad()
        loss = -objective(model(X_t), y_t)
        loss.backward()
        evaluations[0] += 1
        if callback is not None:
            step = start_index * max_iter + min(evaluations[0], max_iter)
            callback(step, n_starts * max_iter)
        return loss

    with (
        gpytorch.settings.max_cholesky_size(10**9),
        gpytorch.settings.fast_computations(False, False, False),
        warnings.catch_warnings(),
    ):
        # Jitter added during line searches far from the optimum is expected, not news.
        warnings.simplefilter("ignore", category=NumericalWarning)
        try:
            optimizer.step(closure)
        except (RuntimeError, ValueError):  # e.g. NotPSDError far from the optimum
            return None
    if callback is not None:
        callback((start_index + 1) * max_iter, n_starts * max_iter)
    values = (
        model.covar_module.base_kernel.lengthscale.detach().numpy().reshape(-1).copy(),
        float(model.covar_module.outputscale.detach()),
        float(likelihood.noise.detach().reshape(-1)[0]),
        float(model.mean_module.constant.detach()),
    )
    if not all(np.all(np.isfinite(v)) for v in values):
        return None
    return values


class _ExactGPModel(gpytorch.models.ExactGP):
    """Constant mean, scaled RBF kernel (one lengthscale per dimension when ard_dims > 1)."""

    def __init__(self, X, y, likelihood, ard_dims):
        super().__init__(X, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(
                ard_num_dims=ard_dims if ard_dims > 1 else None,
                lengthscale_constraint=gpytorch.constraints.GreaterThan(_LENGTHSCALE_LOWER_BOUND),
            )
        )

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(
            self.mean_module(x), self.covar_module(x)
        )
