"""``GPRegressor``: exact GP regression fitted with GPyTorch, explained exactly.

The estimator standardises X and y, fits the hyperparameters of a constant-mean GP with a
kernel (squared exponential, ARD or isotropic; ARD Matern 5/2 or 3/2; ARD rational quadratic;
each with an output scale; or any GPyTorch kernel) and Gaussian noise by maximising the log
marginal likelihood with L-BFGS from a few seeded starting points, and exposes the result as
an ``ExactPosterior`` in the *original* units of X and y. The conversion is exact: a kernel
``k_s`` fitted on standardised data is ``y_std^2 k_s((x - mean)/std, (x' - mean)/std)`` in
original units, which for the named (stationary, ARD) kernels is the same kernel with
lengthscales multiplied by the column standard deviations and output scale by ``y_std^2``,
and for a user-supplied GPyTorch kernel is that kernel wrapped in the input scaling
(``gpexplain.kernels.gpytorch_adapter.input_scaled``).
"""

from __future__ import annotations

import copy
import warnings

import gpytorch
import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin

from gpexplain._validation import as_feature_matrix, as_target
from gpexplain.kernels import RBF, as_kernel
from gpexplain.kernels.gpytorch_adapter import input_scaled, squared_exponential
from gpexplain.models._base import PosteriorPredictMixin
from gpexplain.models._fitting import (
    DEFAULT_NOISE,
    LENGTHSCALE_LOWER_BOUND,
    NOISE_LOWER_BOUND,
    best_of_starts,
    check_multistart_params,
    check_optimizer,
    maximise_exact_marginal_likelihood,
)
from gpexplain.models._standardisation import (
    IGNORED,
    FeatureScaling,
    constant_columns,
    original_lengthscales,
    target_scaling,
)
from gpexplain.posterior import ExactPosterior

__all__ = ["GPRegressor"]

KERNELS = ("ard", "isotropic")  # the squared-exponential names (shared with SparseGPRegressor)
STATIONARY_KERNELS = ("matern52", "matern32", "rq")
KERNEL_NAMES = KERNELS + STATIONARY_KERNELS
_MATERN_NU = {"matern52": 2.5, "matern32": 1.5}


class GPRegressor(PosteriorPredictMixin, RegressorMixin, BaseEstimator):
    """Exact Gaussian-process regression (squared-exponential, Matern, RQ or any GPyTorch kernel).

    Model: ``y = f(x) + eps``, ``f ~ GP(m0, k)``, ``eps ~ N(0, noise)``; by default
    ``k(x, x') = variance * exp(-0.5 * sum_i (x_i - x'_i)^2 / lengthscale_i^2)``.
    Hyperparameters maximise the log marginal likelihood (L-BFGS, strong Wolfe line search,
    GPyTorch exact GP in float64 with Cholesky forced at every size).

    Parameters
    ----------
    kernel : {"ard", "isotropic", "matern52", "matern32", "rq"}, gx.kernels.RBF or
        gpytorch.kernels.Kernel, default "ard"
        ``"ard"``: squared exponential with one lengthscale per feature; ``"isotropic"``: one
        lengthscale for the standardised features (hence per-feature lengthscales
        proportional to the column standard deviations in original units).
        ``"matern52"``, ``"matern32"``: ARD Matern kernels (nu = 5/2, 3/2); ``"rq"``: ARD
        rational quadratic ``(1 + r^2 / (2 alpha))^-alpha`` with its shape alpha fitted; each
        times an output scale, fitted like the squared exponential (same standardisation,
        restarts and bounds). An ``RBF`` instance (original units) is the first starting
        point, or the final kernel when ``optimizer=None``; a vector lengthscale means ARD.
        A GPyTorch kernel (e.g. sums and products of GPyTorch kernels) is copied (the
        argument is not modified) and trained as the covariance module on the standardised
        data, its given hyperparameters being the first start (in standardised units); its
        random restarts draw every ``lengthscale``, ``outputscale`` and RQ ``alpha`` it
        contains log-uniformly in [0.1, 10]. With ``optimizer=None`` it is used as given, in
        original units. A GPyTorch ``RBFKernel`` / ``ScaleKernel(RBFKernel)`` ends up as
        ``gx.kernels.RBF`` (closed-form explanations).
    noise : float, optional
        Noise variance in squared units of y: first starting point (or the final value when
        ``optimizer=None``). Default: 0.1 times the variance of y.
    n_restarts : int, default 3
        Additional seeded random starting points after the first.
    optimizer : {"lbfgs", None}, default "lbfgs"
        None keeps the given hyperparameters (``kernel`` must then be an ``RBF`` instance or
        a GPyTorch kernel).
    max_iter : int, default 200
        L-BFGS iterations per start.
    random_state : int, default 0
        Seed of the random starting points.

    Attributes
    ----------
    posterior_ : ExactPosterior
        Posterior in original units; what explanations consume.
    kernel_ : RBF or gx.kernels.GPyTorchKernel
        Fitted kernel in original units. ``RBF`` for the squared exponential (lengthscale
        ``np.inf`` for constant columns); otherwise a GPyTorch kernel in ``.module``: for
        ``"matern52"``/``"matern32"``/``"rq"`` a ``ScaleKernel`` of the ARD kernel over the
        non-constant columns (``active_dims``) with lengthscales in the units of X, for a
        user-supplied kernel ``input_scaled(fitted, mean, std, var_y)``, i.e.
        ``var_y * k_fitted((x - mean)/std, (x' - mean)/std)`` (std 1 for constant columns).
    noise_ : float
        Fitted noise variance (squared units of y).
    mean_ : float
        Fitted constant prior mean (units of y).
    log_marginal_likelihood_value_ : float
        Optimum on the standardised targets (scikit-learn's ``normalize_y=True`` convention),
        over the distinct rows (exact duplicate rows are fitted once, with a warning).
    restarts_ : list of dict
        Log marginal likelihood reached from each starting point, and ``stopped_early``:
        whether the optimiser raised (e.g. a kernel matrix not positive definite in a line
        search, typical of nearly noise-free data) and the start kept the best point it had
        evaluated.
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
    def _kind(self) -> str:
        """"se", "matern52", "matern32", "rq" or "gpytorch" (a user-supplied module)."""
        if isinstance(self.kernel, RBF):
            return "se"
        if isinstance(self.kernel, gpytorch.kernels.Kernel):
            return "gpytorch"
        if isinstance(self.kernel, str) and self.kernel in KERNEL_NAMES:
            return "se" if self.kernel in KERNELS else self.kernel
        raise ValueError(
            f"unknown kernel {self.kernel!r}; use one of {KERNEL_NAMES}, a gx.kernels.RBF or "
            "a gpytorch.kernels.Kernel."
        )

    def _check_params(self) -> bool:
        """Validate constructor arguments; return whether the kernel is ARD."""
        kind = self._kind()
        if isinstance(self.kernel, RBF):
            # A scalar lengthscale in original units is per-feature on standardised inputs:
            # kept exactly when not optimised, tied (isotropic) when optimised.
            ard = self.kernel.ard or self.optimizer is None
        else:
            ard = self.kernel != "isotropic"
        check_optimizer(self.optimizer)
        if self.optimizer is None and kind not in ("gpytorch",) and not isinstance(
            self.kernel, RBF
        ):
            raise ValueError(
                "optimizer=None needs kernel=gx.kernels.RBF(...) or a GPyTorch kernel with its "
                "values."
            )
        check_multistart_params(self)
        return ard

    def _starting_points(self, ard: bool, scaling: FeatureScaling, y_scale) -> list:
        """Hyperparameters (standardised units) of the first and the random starts."""
        if isinstance(self.kernel, RBF):
            lengthscale = scaling.standardised_lengthscales(self.kernel, ard)
            outputscale = self.kernel.variance / y_scale**2
        else:
            lengthscale = np.ones(scaling.active.size if ard else 1)
            outputscale = 1.0
        noise = DEFAULT_NOISE if self.noise is None else self.noise / y_scale**2
        starts = [(lengthscale, outputscale, max(noise, 2 * NOISE_LOWER_BOUND))]
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

    def _covar_module(self, kind: str, start, index: int, rng):
        """Fresh covariance module (standardised units) set to a starting point.

        SE, Matern, RQ: ``ScaleKernel`` of the ARD (or isotropic SE) kernel with the start's
        lengthscale and output scale (RQ alpha: 1 first, log-uniform in [0.1, 10] after). A
        user kernel: a copy, as given first, with every lengthscale, output scale and alpha
        drawn log-uniformly in [0.1, 10] after.
        """
        lengthscale, outputscale, _ = start
        if kind == "gpytorch":
            module = copy.deepcopy(self.kernel).double()
            if index > 0:
                for child in module.modules():
                    for name in ("lengthscale", "outputscale", "alpha"):
                        current = getattr(child, name, None) if hasattr(child, f"raw_{name}") \
                            else None
                        if isinstance(current, torch.Tensor):
                            drawn = np.exp(rng.uniform(np.log(0.1), np.log(10.0), current.shape))
                            setattr(child, name, torch.as_tensor(drawn))
            return module
        bound = gpytorch.constraints.GreaterThan(LENGTHSCALE_LOWER_BOUND)
        ard_dims = len(lengthscale) if len(lengthscale) > 1 else None
        if kind == "se":
            base = gpytorch.kernels.RBFKernel(ard_num_dims=ard_dims, lengthscale_constraint=bound)
        elif kind == "rq":
            base = gpytorch.kernels.RQKernel(ard_num_dims=ard_dims, lengthscale_constraint=bound)
        else:
            base = gpytorch.kernels.MaternKernel(
                nu=_MATERN_NU[kind], ard_num_dims=ard_dims, lengthscale_constraint=bound
            )
        module = gpytorch.kernels.ScaleKernel(base).double()
        base.lengthscale = torch.as_tensor(lengthscale)
        module.outputscale = torch.tensor(float(outputscale), dtype=torch.float64)
        if kind == "rq":
            alpha = 1.0 if index == 0 else float(np.exp(rng.uniform(np.log(0.1), np.log(10.0))))
            base.alpha = torch.tensor(alpha, dtype=torch.float64)
        return module

    def _given_module(self, kind, start, x_mean, x_scale, y_scale):
        """optimizer=None: the given kernel in standardised units (module, or RBF)."""
        if kind == "gpytorch":
            # k_s(xs, xs') = k(xs * std + mean, ...) / var_y, exactly.
            return input_scaled(
                copy.deepcopy(self.kernel), -x_mean / x_scale, 1.0 / x_scale, 1.0 / y_scale**2
            )
        # A given RBF stays an RBF: a GPyTorch round trip (softplus) would perturb its values.
        return RBF(start[0], start[1])

    def _original_units(self, kind, module, n_features, active, x_mean, x_scale, y_scale):
        """The fitted standardised-units module as a gpexplain kernel in original units."""
        if kind == "gpytorch":
            if self.optimizer is None:
                return as_kernel(copy.deepcopy(self.kernel))
            fitted_se = squared_exponential(module)
            if fitted_se is not None:  # closed-form explanations stay available
                lengthscale = fitted_se._lengthscales(n_features) * x_scale
                return RBF(lengthscale, fitted_se.variance * y_scale**2)
            return as_kernel(input_scaled(module, x_mean, x_scale, y_scale**2))
        if isinstance(module, RBF):
            lengthscale, outputscale = module.lengthscale, module.variance * y_scale**2
        else:
            base = module.base_kernel
            lengthscale = base.lengthscale.detach().numpy().reshape(-1)
            outputscale = float(module.outputscale.detach()) * y_scale**2
        if kind == "se":
            return RBF(original_lengthscales(lengthscale, x_scale, active, n_features), outputscale)
        # Matern / RQ: the same ARD kernel over the non-constant columns, lengthscales in the
        # units of X (the standardisation shift cancels in x - x').
        dims = None if active.size == n_features else torch.as_tensor(active)
        if kind == "rq":
            original = gpytorch.kernels.RQKernel(ard_num_dims=active.size, active_dims=dims)
        else:
            original = gpytorch.kernels.MaternKernel(
                nu=base.nu, ard_num_dims=active.size, active_dims=dims
            )
        # float64 before any value is set: a float32 parameter would round it.
        scaled = gpytorch.kernels.ScaleKernel(original).double()
        if kind == "rq":
            original.alpha = base.alpha.detach().clone()
        original.lengthscale = torch.as_tensor(
            np.broadcast_to(lengthscale, (active.size,)) * x_scale
        )
        scaled.outputscale = torch.tensor(outputscale, dtype=torch.float64)
        return as_kernel(scaled)

    def fit(self, X, y, *, callback=None):
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
        kind = self._kind()
        X, names = as_feature_matrix(X, "X", min_rows=2)
        y = as_target(y, X.shape[0])
        consequence = (
            "a user-supplied kernel still sees them (standardised by 1)"
            if kind == "gpytorch"
            else IGNORED
        )
        constant = constant_columns(X, names, consequence)
        # A user kernel indexes columns itself (active_dims): it gets all of them.
        active = np.arange(X.shape[1]) if kind == "gpytorch" else np.flatnonzero(~constant)
        scaling = FeatureScaling(X, active)
        x_mean, x_scale = scaling.x_mean, scaling.x_scale
        y_mean, y_scale = target_scaling(y)
        Xs = scaling.features(X)
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

        starts = self._starting_points(ard, scaling, y_scale)
        rng = np.random.default_rng([self.random_state, 1])  # shapes of restarts, not starts

        def optimise(index, start):
            if self.optimizer is None:
                given = self._given_module(kind, start, x_mean, x_scale, y_scale)
                return (given, start[2], 0.0), False
            module = self._covar_module(kind, start, index, rng)
            return _optimise(Xs, ys, module, start[2], self.max_iter, callback, index, len(starts))

        def log_marginal_likelihood(hyper):
            module, noise, constant_mean = hyper
            standard = ExactPosterior(
                Xs, ys, as_kernel(copy.deepcopy(module)), noise, mean=constant_mean
            )
            return standard.log_marginal_likelihood()

        best_lml, (module, noise, constant_mean), self.restarts_ = best_of_starts(
            starts, optimise, log_marginal_likelihood,
            "try optimizer=None with a given kernel and noise, or rescale the data.",
        )

        self.kernel_ = self._original_units(
            kind, module, X.shape[1], active, x_mean, x_scale, y_scale
        )
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


def _optimise(Xs, ys, covar_module, noise, max_iter, callback, start_index, n_starts):
    """Maximise the exact log marginal likelihood from one starting point with GPyTorch.

    ``covar_module`` (standardised units) is set to the start and trained in place, with a
    constant prior mean.

    Returns ((covar_module, noise, constant mean), stopped_early) in standardised units, or
    None when the optimiser failed before any evaluation or produced non-finite values.
    ``stopped_early``: the optimiser raised (e.g. a matrix not positive definite in a line
    search) and the best point it had evaluated is returned; nearly noise-free data drive a
    smooth kernel towards a singular K, and that point is still a good fit.
    """
    fitted = maximise_exact_marginal_likelihood(
        Xs, ys, gpytorch.means.ConstantMean(), covar_module, noise, max_iter, callback,
        start_index, n_starts,
    )
    if fitted is None:
        return None
    model, likelihood, stopped_early = fitted
    if callback is not None:
        callback((start_index + 1) * max_iter, n_starts * max_iter)
    noise = float(likelihood.noise.detach().reshape(-1)[0])
    constant_mean = float(model.mean_module.constant.detach())
    parameters = [parameter.detach() for parameter in model.covar_module.parameters()]
    if not (
        np.isfinite(noise)
        and np.isfinite(constant_mean)
        and all(bool(torch.all(torch.isfinite(value))) for value in parameters)
    ):
        return None
    return (model.covar_module.eval(), noise, constant_mean), stopped_early
