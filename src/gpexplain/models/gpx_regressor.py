"""``GPXRegressor``: GP regression with local explanation (Yoshikawa and Iwata, GPX).

Model (paper eqs. 1-9): a locally linear model whose weights are drawn from a GP,

    y_i = w_i^T z_i + eps_y,   w_i = g(x_i) + eps_w,   g_l ~ GP(0, k) independently,

with ``eps_y ~ N(0, noise)`` and ``eps_w ~ N(0, weight_noise I_d)``. ``X`` (what the kernel
sees) and ``Z`` (the interpretable representation whose columns are explained) are separate
inputs; by default ``Z = X``. Integrating out ``W`` and ``G`` (eqs. 12-13)::

    y ~ N(0, C),   C = noise I + (K + weight_noise I) o Z Z^T.

Predictions and explanations use exact forms equal to the paper's main-text eqs. 14 and 18
(its Appendix B, eqs. 29-32, is wrong; see ``docs/errata.md``) without ever
forming an nd x nd matrix. With ``alpha = C^{-1} y``, ``k* = k(x*, X)`` and
``B = diag(k*) Z`` (n x d)::

    E[w*]   = Z^T (k* o alpha)                                   O(n d) per point
    Cov[w*] = (k(x*, x*) + weight_noise) I - B^T C^{-1} B         O(n^2 d + n d^2)
    E[y*]   = E[w*]^T z*,   Var[y*] = noise + z*^T Cov[w*] z*     (eq. 14)

The last line holds exactly, so a prediction is the sum of its feature contributions
``E[w*_l] z*_l``. Equation 18 reduces to the second line because
``A S A^T = k*^T L^{-1} k* - B^T C^{-1} B`` with ``L = K_bar + weight_noise I``.

These are the generic formula of every explanation in gpexplain: GPX *is* an exact GP over the
concatenated inputs ``(x, z)`` with the locally linear kernel ``k_x(x, x') z . z'``
(``gpexplain.kernels.LocallyLinear``) and per-row noise variance ``noise + weight_noise |z_i|^2``
(the diagonal of C), and the weights are the linear functional ``d f / d z``
(``gpexplain.functionals.local_linear_weight``). So ``posterior_`` is an ``ExactPosterior``
and ``predict``/``explain`` go through it and the explanation driver (``explain`` through
``gpexplain.explain.gpx``); only the fit, which maximises the likelihood in closed form over
four hyperparameters, is GPX's own.
"""

from __future__ import annotations

import gpytorch
import numpy as np
import torch
from linear_operator.utils.cholesky import psd_safe_cholesky
from scipy.spatial.distance import pdist
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from gpexplain._threads import native_threads
from gpexplain._torch import as_tensor, to_numpy
from gpexplain._validation import (
    as_feature_matrix,
    as_target,
    check_feature_count,
    check_feature_names,
    check_spread,
)
from gpexplain.kernels import RBF
from gpexplain.kernels.locally_linear import LocallyLinear
from gpexplain.models._fitting import (
    LENGTHSCALE_LOWER_BOUND,
    NOISE_LOWER_BOUND,
    FitError,
    best_of_starts,
    log_uniform,
    run_lbfgs,
)
from gpexplain.models._params import MULTISTART_CONSTRAINTS, ValidatedEstimator, Variance
from gpexplain.models._standardisation import FeatureScaling, warn_constant_columns
from gpexplain.parallel import default_chunk_size, map_chunks
from gpexplain.posterior.exact import ExactPosterior

__all__ = ["GPXRegressor"]

# The paper's initial values (Sec. 5.1), in the internal units (see ``GPXRegressor``):
# theta_1 = 1, sigma_y = 0.1, sigma_w = 0.1 (so both variances 0.01).
_INITIAL_VARIANCE = 1.0
_INITIAL_NOISE = 0.01
_INITIAL_WEIGHT_NOISE = 0.01
# Lower bounds in internal units (noise and lengthscale: ``gpexplain.models._fitting``). The
# weight noise must stay positive (the paper requires it > 0) and keep C well conditioned.
_WEIGHT_NOISE_LOWER_BOUND = 1e-6
# The median heuristic looks at the pairwise distances of at most this many rows (seeded
# subsample), which keeps it O(1) in memory for large data and changes only the start.
_MEDIAN_HEURISTIC_ROWS = 1000


class GPXRegressor(ValidatedEstimator, RegressorMixin, BaseEstimator):
    """Gaussian-process regression with local explanation (GPX; Yoshikawa and Iwata).

    Predicts with a locally linear model ``y = w(x)^T z + eps`` whose weights are drawn from
    ``d`` independent GPs over the kernel inputs ``x`` (plus independent weight noise), and
    explains each prediction with the posterior of those weights: Gaussian, with exact mean
    and covariance (paper eqs. 12-18; Appendix B is wrong, see ``docs/errata.md``).

    Kernel: squared exponential, ``k(x, x') = variance * exp(-0.5 * sum_i (x_i - x'_i)^2 /
    lengthscale_i^2)`` (the paper's eq. 5 with ``theta_1 = variance``,
    ``theta_2 = 2 lengthscale^2``), on internally standardised X: isotropic there (as in the
    paper, which standardises X), so in original units the lengthscale of column i is the
    fitted lengthscale times the column's standard deviation. Constant columns of X are
    ignored by the kernel (lengthscale ``np.inf``).

    Units and internal scaling. Only scalings that are exact reparametrisations of the model
    are applied: X is standardised per column (X only enters the kernel, and the kernel is
    converted back exactly), y is divided by its root mean square and Z by the root mean
    square of its entries, both *without centring*: the model has no intercept, and centring
    y would add one (predictions would no longer be the sum of the contributions). Every
    fitted value is reported in original units: weights in units of y per unit of z,
    ``kernel_.variance`` and ``weight_noise_`` in squared weight units, ``noise_`` in squared
    units of y. To reproduce the paper's setting, standardise X, y and Z yourself (the
    internal scalings are then the identity and the initial values are exactly the
    paper's). To get an intercept, add a column of ones to Z: its weight is a GP over x.

    Parameters
    ----------
    kernel : gx.kernels.RBF, optional
        Kernel in original units of X: the starting point of the optimisation (a vector
        lengthscale means ARD and is optimised per column; a scalar is optimised as one
        lengthscale for the standardised X, starting from the geometric mean of the
        per-column values), or the final kernel with ``optimizer=None``. Default: variance
        1 (internal units) and the median-heuristic lengthscale: the paper's ``theta_2`` set
        to the median of the squared pairwise Euclidean distances of the standardised rows
        (Garreau et al. 2017, ``h^2 = H_n / 2``), i.e. ``lengthscale = sqrt(median / 2)``;
        the median is over distinct pairs of at most 1000 rows (seeded subsample).
    weight_noise : float, optional
        ``sigma_w^2``, the variance of the weight noise ``eps_w``, in squared weight units.
        Default start: 0.01 in internal units (the paper's ``sigma_w = 0.1``).
    noise : float, optional
        ``sigma_y^2``, the observation-noise variance, in squared units of y. Default start:
        0.01 in internal units (the paper's ``sigma_y = 0.1``).
    n_restarts : int, default 3
        Random starting points tried after the first (the given values, or the defaults
        above); the best log marginal likelihood wins. The likelihood has an all-noise local
        optimum (tiny lengthscale, every weight exactly 0 away from the training rows) that a
        single start can land on. Restarts draw, in internal units, the lengthscale as the
        median heuristic times log-uniform [0.1, 10], the variance log-uniform [0.1, 10] and
        both noise variances log-uniform [1e-3, 1].
    optimizer : {"lbfgs", None}, default "lbfgs"
        ``"lbfgs"``: maximise the log marginal likelihood ``log N(y | 0, C)`` (eq. 12) with
        torch's L-BFGS (strong Wolfe line search, float64, autograd gradients; positivity by
        GPyTorch ``GreaterThan`` constraints). None keeps the given ``kernel``,
        ``weight_noise`` and ``noise`` exactly (all three are then required).
    max_iter : int, default 200
        L-BFGS iterations per start.
    random_state : int, default 0
        Seed of the random starting points and of the row subsample of the median heuristic
        (used only when n > 1000).

    Attributes
    ----------
    kernel_ : RBF
        Fitted kernel in original units of X (variance in squared weight units).
    weight_noise_ : float
        Fitted weight-noise variance (squared weight units).
    noise_ : float
        Fitted observation-noise variance (squared units of y).
    log_marginal_likelihood_value_ : float
        ``log N(y | 0, C)`` at the fitted values, as a density of y in its original units.
    restarts_ : list of dict
        Per start: ``start`` (index), ``log_marginal_likelihood`` per data point in internal
        units (None when the start failed) and ``stopped_early`` (as ``GPRegressor``'s).
    feature_names_in_ : list of str
        Names of Z's columns: the explained features.
    n_features_in_ : int
        Number of Z's columns (equal to X's when Z is X).
    kernel_feature_names_ : list of str
        Names of X's columns (the kernel inputs).
    X_train_, Z_train_ : ndarray (n, p), (n, d)
        Training inputs in original units.
    posterior_ : ExactPosterior
        The exact GP over inputs ``[x, z]`` (columns named ``x:<name>`` and ``z:<name>``) with
        the locally linear kernel and per-row noise ``noise_ + weight_noise_ |z_i|^2``.
    alpha_ : ndarray (n,)
        ``C^{-1} y`` (``posterior_.alpha``).
    cholesky_ : ndarray (n, n)
        Lower Cholesky factor of C (plus ``jitter_`` on the diagonal when it was needed).
    jitter_ : float
    z_is_x_ : bool
        Whether Z was X (then ``predict``/``explain`` take Z = X by default).

    Raises
    ------
    ValueError, TypeError
        From ``fit``: bad inputs (named argument, row and column), Z with a different number
        of rows than X, fewer than 2 rows, every column of X constant, unknown optimizer,
        non-positive variances, ``optimizer=None`` without all hyperparameters.
    FitError
        From ``fit``: the optimiser produced non-finite values or C was not positive
        definite.

    Notes
    -----
    Cost: each likelihood evaluation O(n^3 + n^2 (p + d)) (one Cholesky of C and one
    Cholesky inverse for the gradient); weight means and predictions O(n d) per point, the
    latent predictive variance O(n^2), the weight covariance O(n^2 d + n d^2) per point. No
    nd x nd matrix is ever formed.

    Examples
    --------
    >>> model = GPXRegressor().fit(X_train, y_train)            # doctest: +SKIP
    >>> contributions = model.explain(X_test)                   # doctest: +SKIP
    >>> contributions.mean.sum(axis=1)  # equals model.predict(X_test)   # doctest: +SKIP
    >>> weights = model.explain(X_test, what="weights")         # doctest: +SKIP

    References
    ----------
    Y. Yoshikawa and T. Iwata, "Gaussian Process Regression With Local Explanation",
    arXiv:2007.01669 (2020).
    """

    # Plugged in by ``gpexplain.explain.gpx`` (see ``explain``): the function explaining a fitted
    # model, called as a method.
    _explanation = None

    def __init__(
        self,
        kernel: RBF | None = None,
        weight_noise: float | None = None,
        noise: float | None = None,
        n_restarts: int = 3,
        optimizer: str | None = "lbfgs",
        max_iter: int = 200,
        random_state: int = 0,
    ):
        self._store_parameters(locals())

    _parameter_constraints = {
        **MULTISTART_CONSTRAINTS,
        "weight_noise": Variance(),
    }

    # -- fitting ------------------------------------------------------------------------
    def _check_params(self) -> None:
        if self.kernel is not None and not isinstance(self.kernel, RBF):
            raise TypeError(
                f"kernel must be None or a gx.kernels.RBF, got {type(self.kernel).__name__}."
            )
        self._validate_params()
        if self.optimizer is None and (
            self.kernel is None or self.weight_noise is None or self.noise is None
        ):
            raise ValueError(
                "optimizer=None keeps given hyperparameters, so it needs kernel=gx.kernels.RBF"
                "(...), weight_noise=... and noise=...; or use optimizer='lbfgs'."
            )

    def fit(self, X, y, Z=None, *, callback=None):
        """Fit the hyperparameters by maximising the marginal likelihood (eq. 12).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_kernel_features)
            Kernel inputs (NumPy, pandas or torch). At least 2 rows.
        y : array-like of shape (n_samples,)
        Z : array-like of shape (n_samples, n_features), optional
            Interpretable representation whose columns are explained (column names become
            ``feature_names_in_``). Default: X itself.
        callback : callable(step, total), optional
            Called after every marginal-likelihood evaluation of the optimiser (for a
            caller's progress bar); not called with ``optimizer=None``.

        Returns
        -------
        self
        """
        self._check_params()
        X, x_names = as_feature_matrix(X, "X", min_rows=2)
        y = as_target(y, X.shape[0])
        Z, z_names = (X, x_names) if Z is None else _as_representation(Z, X.shape[0])
        self.z_is_x_ = Z is X
        check_spread(X, x_names)
        constant = np.ptp(X, axis=0) == 0
        if constant.all():
            raise ValueError(
                "every column of X is constant, so the kernel cannot tell rows apart; pass "
                "at least one varying kernel input."
            )
        if self.optimizer is not None:
            warn_constant_columns(x_names, constant, "the kernel ignores them", where=" of X")

        if self.optimizer is None:
            self.kernel_ = RBF(self.kernel.lengthscale.copy(), self.kernel.variance)
            self.kernel_._lengthscales(X.shape[1])  # a ValueError if the count is wrong
            self.weight_noise_ = float(self.weight_noise)
            self.noise_ = float(self.noise)
        else:
            with native_threads(len(X)):
                self._optimise(X, y, Z, constant, callback)

        self.X_train_, self.Z_train_ = X, Z
        kernel = LocallyLinear(self.kernel_, X.shape[1], self.weight_noise_)
        row_noise = self.noise_ + self.weight_noise_ * np.sum(Z * Z, axis=1)
        try:
            self.posterior_ = ExactPosterior(
                np.hstack([X, Z]), y, kernel, row_noise,
                feature_names=[f"x:{n}" for n in x_names] + [f"z:{n}" for n in z_names],
            )
        except ValueError as error:  # C not positive definite even with jitter
            raise FitError(str(error)) from None
        self.alpha_ = self.posterior_.alpha
        self.cholesky_, self.jitter_ = self.posterior_.cholesky, self.posterior_.jitter
        self.log_marginal_likelihood_value_ = self.posterior_.log_marginal_likelihood()
        self._record_features(z_names)
        self.kernel_feature_names_ = list(x_names)
        return self

    def _optimise(self, X, y, Z, constant, callback) -> None:
        """Maximise the marginal likelihood in internal units; set the fitted attributes."""
        scaling = FeatureScaling(X, np.flatnonzero(~constant))
        y_scale = _root_mean_square(y)
        z_scale = _root_mean_square(Z)
        # Internal weights are z_scale / y_scale times the original ones, so the variances
        # of the weights scale by the square of that factor.
        weight_scale = (z_scale / y_scale) ** 2
        Xs = scaling.features(X)

        if self.kernel is None:
            lengthscale = np.array([_median_heuristic(Xs, self.random_state)])
            variance = _INITIAL_VARIANCE
        else:
            lengthscale = scaling.standardised_lengthscales(self.kernel, self.kernel.ard)
            variance = self.kernel.variance * weight_scale
        weight_noise = (
            _INITIAL_WEIGHT_NOISE if self.weight_noise is None
            else self.weight_noise * weight_scale
        )
        noise = _INITIAL_NOISE if self.noise is None else self.noise / y_scale**2
        starts = [(lengthscale, variance, weight_noise, noise)]
        rng = np.random.default_rng(self.random_state)
        centre = _median_heuristic(Xs, self.random_state)
        for _ in range(self.n_restarts):
            starts.append((
                centre * log_uniform(rng, 0.1, 10.0, size=lengthscale.shape),
                float(log_uniform(rng, 0.1, 10.0)),
                float(log_uniform(rng, 1e-3, 1.0)),
                float(log_uniform(rng, 1e-3, 1.0)),
            ))
        problem = _Problem(Xs, Z / z_scale, y / y_scale)

        def optimise(index, start):
            progress = None if callback is None else (
                lambda step, _: callback(index * self.max_iter + step,
                                         len(starts) * self.max_iter)
            )
            try:
                return problem.maximise(start, self.max_iter, progress), False
            except FitError:  # this start failed; the others may not
                return None

        _, best, self.restarts_ = best_of_starts(
            starts, optimise, problem.log_marginal_likelihood,
            "try other starting values (kernel, weight_noise, noise), more n_restarts, or "
            "optimizer=None.",
        )
        lengthscale, variance, weight_noise, noise = best

        self.kernel_ = RBF(scaling.original_lengthscales(lengthscale), variance / weight_scale)
        self.weight_noise_ = float(weight_noise / weight_scale)
        self.noise_ = float(noise * y_scale**2)

    # -- prediction ---------------------------------------------------------------------
    def _check_query(self, X, Z) -> tuple[np.ndarray, np.ndarray]:
        """Validate query points; return (X, Z) as float64 arrays with matching rows."""
        check_is_fitted(self, "alpha_")
        values, names = as_feature_matrix(X, "X")
        check_feature_count(values, self.X_train_.shape[1], "X")
        check_feature_names(X, names, self.kernel_feature_names_, "X", what="columns")
        if Z is None:
            if not self.z_is_x_:
                raise ValueError(
                    "the model was fitted with a separate Z; pass Z (the interpretable "
                    "representation of these rows) as well."
                )
            return values, values
        z_values, z_names = _as_representation(Z, values.shape[0])
        check_feature_count(z_values, self.n_features_in_, "Z")
        check_feature_names(Z, z_names, self.feature_names_in_, "Z", what="columns")
        return values, z_values

    def predict(self, X, Z=None, return_std: bool = False, noisy: bool = False):
        """Predictive mean (and standard deviation) of y in its original units (eq. 14).

        Parameters
        ----------
        X : array-like of shape (n_points, n_kernel_features)
        Z : array-like of shape (n_points, n_features), optional
            Required when the model was fitted with a separate Z; default X.
        return_std : bool
            Also return the standard deviation.
        noisy : bool
            False (default): of the latent locally linear prediction ``w*^T z*`` (weight
            noise included, observation noise not). True: of a new observation ``y*``, which
            adds ``noise_`` to the variance (the paper's eq. 14).

        Returns
        -------
        mean : ndarray (n_points,)
        std : ndarray (n_points,), only with ``return_std=True``

        Raises
        ------
        ValueError
            Wrong number of columns, non-finite values, DataFrame columns that do not match
            the training names, Z missing or with a different number of rows.
        """
        inputs = np.hstack(self._check_query(X, Z))
        posterior = self.posterior_
        chunk_size = default_chunk_size(*posterior.train_inputs.shape)
        if not return_std:
            return map_chunks(lambda rows: (posterior.predict_mean(rows),), inputs, chunk_size)[0]
        mean, var = map_chunks(posterior.predict, inputs, chunk_size)
        if noisy:
            var = var + self.noise_
        return mean, np.sqrt(var)

    def explain(self, X, Z=None, what: str = "contributions", return_cov: bool = True):
        """Posterior of the local weights or of the feature contributions (eq. 18).

        Parameters
        ----------
        X : array-like of shape (n_points, n_kernel_features)
        Z : array-like of shape (n_points, n_features), optional
            Required when the model was fitted with a separate Z; default X.
        what : {"contributions", "weights"}
            ``"contributions"``: ``phi_l = w*_l z*_l`` (units of y), mean ``E[w*] o z*``,
            covariance ``diag(z*) Cov[w*] diag(z*)``. Their sum is the prediction exactly:
            base value 0, because a locally linear model has no intercept; so
            ``baseline_prediction = 0.0`` and ``completeness_gap()`` checks
            ``sum_l E[phi_l] = E[w*^T z*]`` and ``1^T Cov[phi] 1 = Var[w*^T z*]`` (the latent
            predictive variance, ``difference_variance``; computed independently through
            eq. 14's ``c*``). ``"weights"``: ``w*`` itself (units of y per unit of z), mean
            ``E[w*]`` and covariance ``Cov[w*]`` (eq. 18); no completeness applies, so
            ``baseline_prediction`` and ``difference_variance`` are None.
        return_cov : bool
            Compute the (n_points, d, d) covariances (O(n^2 d + n d^2) per point) and, for
            contributions, ``difference_variance``. False: means only, O(n d) per point
            (``cov`` and ``difference_variance`` None).

        Returns
        -------
        Attribution
            ``X`` holds the explained Z rows (original units), ``prediction`` the latent
            predictive mean ``E[w*^T z*]``, ``baseline`` None, ``feature_names`` Z's column
            names, ``method`` ``"GPX contributions"`` or ``"GPX weights"``.

        Raises
        ------
        ValueError
            Unknown ``what``, or bad query points (see ``predict``).

        Notes
        -----
        Computed by ``gpexplain.explain.gpx.gpx_explanation``: explanations sit above
        estimators (DESIGN.md's layers), so that module plugs itself in here
        (``_explanation``) when it is imported, which ``import gpexplain`` always does.
        """
        return self._explanation(X, Z, what=what, return_cov=return_cov)


def _as_representation(Z, n_rows: int) -> tuple[np.ndarray, list[str]]:
    """Validate Z: a finite numeric matrix with one row per row of X."""
    values, names = as_feature_matrix(Z, "Z", feature_names=None)
    if values.shape[0] != n_rows:
        raise ValueError(
            f"Z has {values.shape[0]} rows but X has {n_rows}; Z must hold the interpretable "
            "representation of the same rows, in the same order."
        )
    return values, names


def _root_mean_square(values: np.ndarray) -> float:
    """sqrt(mean(values^2)), or 1.0 for an all-zero array (nothing to rescale)."""
    scale = float(np.sqrt(np.mean(values**2)))
    return scale if scale > 0 else 1.0


def _median_heuristic(Xs: np.ndarray, random_state: int) -> float:
    """Lengthscale ``sqrt(median_{i<j} |x_i - x_j|^2 / 2)`` (Garreau et al. 2017).

    The median is over distinct pairs of at most ``_MEDIAN_HEURISTIC_ROWS`` rows; when more
    than half of the pairs coincide (median 0) it is taken over the non-zero distances.
    """
    if Xs.shape[0] > _MEDIAN_HEURISTIC_ROWS:
        rng = np.random.default_rng(random_state)
        Xs = Xs[rng.choice(Xs.shape[0], _MEDIAN_HEURISTIC_ROWS, replace=False)]
    squared = pdist(Xs, "sqeuclidean")
    median = float(np.median(squared))
    if median == 0.0:
        median = float(np.median(squared[squared > 0]))
    return max(np.sqrt(median / 2.0), 2 * LENGTHSCALE_LOWER_BOUND)


def _covariance(K, gram, weight_noise, noise):
    """``C = noise I + (K + weight_noise I) o gram`` with ``gram = Z Z^T`` (eq. 13).

    Works on NumPy arrays and torch tensors alike.
    """
    diagonal = weight_noise * gram.diagonal() + noise
    return K * gram + (torch.diag(diagonal) if isinstance(K, torch.Tensor) else np.diag(diagonal))


def _squared_distances(X, lengthscale):
    """``sum_i (x_i - x'_i)^2 / lengthscale_i^2`` over rows of X, (n, n), in torch.

    Direct differences one column at a time: no cancellation, O(n^2) memory even for ARD.
    ``lengthscale`` is a tensor (1,) (isotropic) or (p,).
    """
    total = X.new_zeros(X.shape[0], X.shape[0])
    for i in range(X.shape[1]):
        scale = lengthscale[i] if lengthscale.numel() > 1 else lengthscale[0]
        total = total + ((X[:, None, i] - X[None, :, i]) / scale) ** 2
    return total


def _kernel_matrix(X, lengthscale, variance, isotropic_distances=None):
    """SE kernel matrix k(X, X) in torch, differentiable in the hyperparameters.

    For the isotropic kernel the unscaled squared distances do not depend on the
    hyperparameters; pass them once as ``isotropic_distances`` to skip recomputing them.
    """
    if isotropic_distances is not None:
        return variance * torch.exp(-0.5 * isotropic_distances / lengthscale[0] ** 2)
    return variance * torch.exp(-0.5 * _squared_distances(X, lengthscale))


class _GaussianLogDensity(torch.autograd.Function):
    """``log N(y | 0, C)`` with its gradient in closed form.

    ``d/dC = (alpha alpha^T - C^{-1}) / 2`` and ``d/dy = -alpha`` with ``alpha = C^{-1} y``
    (Rasmussen and Williams, eq. 5.9): one Cholesky inverse, several times faster than
    differentiating through torch's Cholesky factorisation and solve.
    """

    @staticmethod
    def forward(ctx, C, y):
        L = psd_safe_cholesky(C)
        alpha = torch.cholesky_solve(y[:, None], L)[:, 0]
        ctx.save_for_backward(L, alpha)
        return (
            -0.5 * y @ alpha
            - torch.log(torch.diagonal(L)).sum()
            - 0.5 * y.shape[0] * float(np.log(2.0 * np.pi))
        )

    @staticmethod
    def backward(ctx, grad):
        L, alpha = ctx.saved_tensors
        grad_C = 0.5 * grad * (torch.outer(alpha, alpha) - torch.cholesky_inverse(L))
        return grad_C, -grad * alpha


def _log_marginal_likelihood(K, gram, y, weight_noise, noise):
    """``log N(y | 0, C)`` (eqs. 12-13) in torch, differentiable in its inputs.

    Parameters
    ----------
    K : tensor (n, n), kernel matrix; gram : tensor (n, n), ``Z Z^T``; y : tensor (n,)
    weight_noise, noise : tensors ()

    Returns
    -------
    tensor ()
    """
    return _GaussianLogDensity.apply(_covariance(K, gram, weight_noise, noise), y)


class _Problem:
    """GPX's log marginal likelihood per data point on internal-unit data, and its maximiser.

    Parameters
    ----------
    Xs, Zs, ys : ndarray
        Standardised kernel inputs, scaled representation and scaled targets.
    """

    def __init__(self, Xs, Zs, ys):
        self.X, Z, self.y = (as_tensor(a) for a in (Xs, Zs, ys))
        self.gram = Z @ Z.T
        # For the isotropic kernel the unscaled squared distances are computed once.
        self.isotropic_distances = _squared_distances(self.X, as_tensor(np.ones(1), like=self.X))

    def loss(self, lengthscale, variance, weight_noise, noise):
        """Minus the log marginal likelihood per data point (torch tensors in, tensor out)."""
        K = _kernel_matrix(
            self.X, lengthscale, variance,
            self.isotropic_distances if lengthscale.numel() == 1 else None,
        )
        return -_log_marginal_likelihood(K, self.gram, self.y, weight_noise, noise) / len(self.y)

    def log_marginal_likelihood(self, hyper) -> float:
        """At ``(lengthscale, variance, weight_noise, noise)``; ValueError where C is not
        positive definite (``best_of_starts`` then discards the start)."""
        values = [as_tensor(v, like=self.X).reshape(-1) for v in hyper]
        try:
            with torch.no_grad():
                return -float(self.loss(values[0], values[1][0], values[2][0], values[3][0]))
        except RuntimeError as error:  # NotPSDError: C not positive definite
            raise ValueError(str(error)) from None

    def maximise(self, start, max_iter, callback=None):
        """L-BFGS (strong Wolfe) from ``start``; returns (lengthscale array, variance,
        weight_noise, noise).

        Raises
        ------
        FitError
            The optimiser failed (C not positive definite even with jitter) or ended at
            non-finite values.
        """
        lengthscale, variance, weight_noise, noise = start
        constraints = (
            gpytorch.constraints.GreaterThan(LENGTHSCALE_LOWER_BOUND),
            gpytorch.constraints.Positive(),
            gpytorch.constraints.GreaterThan(_WEIGHT_NOISE_LOWER_BOUND),
            gpytorch.constraints.GreaterThan(NOISE_LOWER_BOUND),
        )
        values = (
            np.maximum(lengthscale, 2 * LENGTHSCALE_LOWER_BOUND),
            variance,
            max(weight_noise, 2 * _WEIGHT_NOISE_LOWER_BOUND),
            max(noise, 2 * NOISE_LOWER_BOUND),
        )
        raw = [
            constraint.inverse_transform(as_tensor(value, like=self.X).reshape(-1))
            .detach()
            .requires_grad_(True)
            for constraint, value in zip(constraints, values, strict=True)
        ]

        def hyperparameters():
            return [c.transform(r) for c, r in zip(constraints, raw, strict=True)]

        def loss():
            ell, var, w_noise, y_noise = hyperparameters()
            return self.loss(ell, var[0], w_noise[0], y_noise[0])

        evaluations = [0]

        def on_evaluation(_):
            evaluations[0] += 1
            callback(min(evaluations[0], max_iter), max_iter)

        try:
            run_lbfgs(raw, loss, max_iter, None if callback is None else on_evaluation)
        except (RuntimeError, ValueError) as error:  # NotPSDError: C singular along the search
            raise FitError(
                "marginal-likelihood optimisation failed (C not positive definite)"
            ) from error
        fitted = [to_numpy(h).copy() for h in hyperparameters()]
        if not all(np.all(np.isfinite(v)) for v in fitted):
            raise FitError("marginal-likelihood optimisation ended at non-finite values")
        return fitted[0], float(fitted[1][0]), float(fitted[2][0]), float(fitted[3][0])
