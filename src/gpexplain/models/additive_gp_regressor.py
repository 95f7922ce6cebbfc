"""``AdditiveGPRegressor``: orthogonal additive GP regression, explained by exact Shapley values.

The estimator standardises every column of X (an affine map, ``sklearn StandardScaler``) and y,
fits the lengthscales, the interaction-order variances and the noise of an orthogonal additive
GP (Lu, Boukouvalas and Hensman 2022) by maximising the log marginal likelihood with GPyTorch,
and exposes the result as an ``ExactPosterior`` in the original units of X and y.

Why an affine input transform: with the ``"gaussian"`` measure the kernel is constrained under
``N(0, 1)`` on the standardised columns, i.e. under ``N(mean_i, std_i^2)`` on the original
columns, and an SE kernel on standardised inputs is exactly an SE kernel on the original inputs
with lengthscales multiplied by the column scales; so ``posterior_`` holds a plain
``OrthogonalAdditive`` kernel in original units and nothing is approximated. A nonlinear
(Yeo-Johnson, quantile) transform would describe skewed columns better but would make the
posterior's kernel a warped one; for skewed or discrete columns use ``measure="empirical"``,
whose product measure is the empirical marginal of each column, instead.

What the explanations mean: Shapley values and global effects are those of the marginal game
under the fitted product measure ``measure_`` (Gaussian with each column's mean and standard
deviation, or the empirical marginals), reported per original feature, in units of y.
"""

from __future__ import annotations

import math

import gpytorch
import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.preprocessing import StandardScaler

from gpexplain._torch import to_numpy
from gpexplain.kernels.measures import Empirical, Gaussian
from gpexplain.kernels.orthogonal_additive import ACCEPTED_MEASURES, OrthogonalAdditive
from gpexplain.models._base import PosteriorEstimator
from gpexplain.models._fitting import (
    DEFAULT_NOISE,
    LENGTHSCALE_LOWER_BOUND,
    NOISE_LOWER_BOUND,
    best_of_starts,
    log_uniform,
    maximise_exact_marginal_likelihood,
)
from gpexplain.models._params import MULTISTART_CONSTRAINTS, Integer, Options
from gpexplain.models._standardisation import (
    constant_columns,
    original_lengthscales,
    target_scaling,
)
from gpexplain.posterior import ExactPosterior

__all__ = ["AdditiveGPRegressor"]

_CONSTANT_VARIANCE_START = 0.1  # sigma_0^2 on centred, standardised targets


class AdditiveGPRegressor(
    PosteriorEstimator, RegressorMixin, BaseEstimator
):
    """Orthogonal additive GP regression with squared-exponential base kernels.

    Model: ``y = f(x) + eps``, ``f ~ GP(m0, k)`` with ``k(x, x') = sum_{q=0}^{Q} sigma_q^2
    e_q(kt_1(x_1, x'_1), ..., kt_d(x_d, x'_d))`` (``gx.kernels.OrthogonalAdditive``), the base
    kernels constrained to integrate to zero under the product measure ``measure_``, and
    ``eps ~ N(0, noise)``. ``m0`` is the mean of y; the random constant with variance
    ``sigma_0^2`` absorbs any remaining offset. Lengthscales, order variances and noise maximise
    the log marginal likelihood (L-BFGS, GPyTorch exact GP in float64, Cholesky forced).

    Parameters
    ----------
    max_order : int, optional
        Highest interaction order Q kept (1 = additive main effects only). Default: all orders
        up to the number of (non-constant) features.
    measure : {"gaussian", "empirical"}, default "gaussian"
        Product measure of the orthogonality constraint and of the Shapley game:
        ``"gaussian"``: ``N(mean_i, std_i^2)`` per column (closed forms);
        ``"empirical"``: each column's empirical distribution (finite sums over the training
        rows; costs O(n) more per kernel entry).
    noise : float, optional
        Noise variance in squared units of y: first starting point (or the final value when
        ``optimizer=None``). Default: 0.1 times the variance of y.
    n_restarts : int, default 2
        Additional seeded random starting points after the first.
    optimizer : {"lbfgs", None}, default "lbfgs"
        None keeps the first starting point: lengthscale 1 standard deviation per feature,
        ``sigma_0^2 = 0.1 var(y)``, ``sigma_q^2 = var(y) / (Q C(d, q))`` and ``noise``.
    max_iter : int, default 200
        L-BFGS iterations per start.
    random_state : int, default 0
        Seed of the random starting points.

    Attributes
    ----------
    posterior_ : ExactPosterior
        Posterior in original units (kernel ``kernel_``); ``posterior_.predict(X)`` takes X in
        its original units, since the input transform is affine and folded into the kernel.
    kernel_ : OrthogonalAdditive
        Fitted kernel in original units.
    lengthscale_ : ndarray (n_features,)
        Base-kernel lengthscales in the units of each feature (``np.inf`` for constant columns).
    order_variances_ : ndarray (Q + 1,)
        ``[sigma_0^2, ..., sigma_Q^2]`` in squared units of y.
    noise_ : float
        Noise variance (squared units of y).
    mean_ : float
        Constant prior mean m0 (the mean of y).
    measure_ : gx.measures.Gaussian or gx.measures.Empirical
        The product measure in original units.
    input_transform_ : sklearn.preprocessing.StandardScaler
        The affine per-column standardisation used while fitting (constant columns get scale 1).
    log_marginal_likelihood_value_ : float
        Optimum on the standardised targets.
    restarts_ : list of dict
        Log marginal likelihood reached from each starting point.
    constant_features_ : list of str
        Columns constant in the training data; ignored by the kernel (zero attributions).
    feature_names_in_ : list of str
    n_features_in_ : int

    Raises
    ------
    ValueError, TypeError
        From ``fit``: bad inputs (named column/row), fewer than 2 rows, all columns constant,
        unknown measure or optimizer, bad ``max_order``/``n_restarts``/``max_iter``/``noise``.
    FitError
        From ``fit``: the optimiser failed from every starting point.
    """

    _parameter_constraints = {
        "measure": Options(ACCEPTED_MEASURES),
        "max_order": Integer(1, allow_none=True),
        **MULTISTART_CONSTRAINTS,
    }

    def __init__(
        self,
        max_order: int | None = None,
        measure: str = "gaussian",
        noise: float | None = None,
        n_restarts: int = 2,
        optimizer: str | None = "lbfgs",
        max_iter: int = 200,
        random_state: int = 0,
    ):
        self._store_parameters(locals())


    def _starting_points(self, n_active: int, order: int, y_scale: float) -> list:
        """(lengthscales, order variances, noise) in standardised units for each start.

        ``e_q`` sums C(d, q) products, so ``sigma_q^2 = 1 / (Q C(d, q))`` gives every order a
        comparable share of the unit prior variance.
        """
        orders = np.arange(1, order + 1)
        subsets = np.array([math.comb(n_active, q) for q in orders], dtype=np.float64)
        variances = np.concatenate([[_CONSTANT_VARIANCE_START], 1.0 / (order * subsets)])
        noise = DEFAULT_NOISE if self.noise is None else self.noise / y_scale**2
        starts = [(np.ones(n_active), variances, max(noise, 2 * NOISE_LOWER_BOUND))]
        rng = np.random.default_rng(self.random_state)
        for _ in range(self.n_restarts if self.optimizer else 0):
            starts.append(
                (
                    log_uniform(rng, 0.3, 3.0, size=n_active),
                    variances * log_uniform(rng, 0.1, 10.0, size=order + 1),
                    float(log_uniform(rng, 1e-3, 1.0)),
                )
            )
        return starts

    def _fit(self, X, y, names, callback) -> None:
        """Fit the hyperparameters and build the posterior (data and parameters validated)."""
        constant = constant_columns(X, names)
        active = np.flatnonzero(~constant)
        order = active.size if self.max_order is None else min(int(self.max_order), active.size)
        transform = StandardScaler().fit(X)
        Xs = transform.transform(X)[:, active]
        y_mean, y_scale = target_scaling(y)
        ys = (y - y_mean) / y_scale
        standard_measure = Gaussian(0.0, 1.0) if self.measure == "gaussian" else Empirical(Xs)

        starts = self._starting_points(active.size, order, y_scale)
        measure = standard_measure.resolve(active.size)

        def optimise(index, start):
            if self.optimizer is None:
                return start, False
            return _optimise(
                Xs, ys, measure, order, start, self.max_iter, callback, index, len(starts)
            )

        def log_marginal_likelihood(hyper):
            kernel = OrthogonalAdditive(hyper[0], hyper[1], standard_measure, max_order=order)
            return ExactPosterior(Xs, ys, kernel, hyper[2]).log_marginal_likelihood()

        best_lml, (lengthscale, variances, noise), self.restarts_ = best_of_starts(
            starts, optimise, log_marginal_likelihood,
            "try optimizer=None with a given noise, a lower max_order, or rescale the data.",
        )

        self.input_transform_ = transform
        self.lengthscale_ = original_lengthscales(
            lengthscale, transform.scale_[active], active, X.shape[1]
        )
        self.order_variances_ = np.asarray(variances) * y_scale**2
        self.noise_ = float(noise * y_scale**2)
        self.mean_ = y_mean
        self.measure_ = (
            Gaussian(transform.mean_, transform.scale_)
            if self.measure == "gaussian"
            else Empirical(X)
        )
        self.kernel_ = OrthogonalAdditive(
            self.lengthscale_, self.order_variances_, self.measure_, max_order=order
        )
        self.log_marginal_likelihood_value_ = float(best_lml)
        self.constant_features_ = [names[i] for i in np.flatnonzero(constant)]
        self.posterior_ = ExactPosterior(
            X, y, self.kernel_, self.noise_, mean=self.mean_, feature_names=names
        )


def _optimise(Xs, ys, measure, order, start, max_iter, callback, start_index, n_starts):
    """Maximise the exact log marginal likelihood from one start; standardised units.

    Returns ((lengthscales, order variances, noise), stopped_early), or None when the
    optimiser failed before any evaluation or produced non-finite values (policy:
    ``gpexplain.models._fitting.best_of_starts``).
    """
    lengthscale, variances, noise = start
    kernel = OrthogonalAdditive(lengthscale, variances, measure, max_order=order)
    covar_module = kernel.torch_kernel(
        Xs.shape[1],
        lengthscale_constraint=gpytorch.constraints.GreaterThan(LENGTHSCALE_LOWER_BOUND),
    )
    # Zero mean: the targets are centred, and the random constant sigma_0^2 absorbs the rest.
    fitted = maximise_exact_marginal_likelihood(
        Xs, ys, gpytorch.means.ZeroMean(), covar_module, noise, max_iter, callback,
        start_index, n_starts,
    )
    if fitted is None:
        return None
    _, likelihood, stopped_early = fitted
    values = (
        to_numpy(covar_module.lengthscale).reshape(-1).copy(),
        to_numpy(covar_module.order_variances).copy(),
        float(likelihood.noise.detach().reshape(-1)[0]),
    )
    if not all(np.all(np.isfinite(v)) for v in values):
        return None
    return values, stopped_early
