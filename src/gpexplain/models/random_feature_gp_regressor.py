"""``RandomFeatureGPRegressor``: sparse-spectrum GP regression (Butler et al. 2024, Sec. 3.3).

The kernel is an ARD squared exponential approximated by M random Fourier frequencies drawn
from its spectral density, ``v_m ~ N(0, diag(lengthscale)^-2)``; the posterior is exact Bayesian
linear regression on the 2M features (``RandomFeaturePosterior``, O(n M^2)). With
``n_models = R > 1`` the model is marginalised over R independent frequency draws (Sec. 5.5)
and summarised by the exact moments of the mixture (``MixturePosterior``).

Hyperparameters come from an exact ``GPRegressor`` fit (ML-II, standardised internally) on a
seeded random subset of at most ``max_fit_samples`` rows, rather than from the random-feature
marginal likelihood. Why: (1) the frequencies are then Monte Carlo draws from the spectral
density of one well-defined ARD-SE GP, so the random-feature kernel is an unbiased estimate of
that kernel and the attributions converge to that GP's exact attributions as M grows, which
is what Sec. 5.5 compares; (2) every one of the R draws shares the hyperparameters, so the
marginalised model averages over the frequencies only, as in Sec. 5.5; (3) maximising the
random-feature marginal likelihood for fixed draws overfits at small M (Lazaro-Gredilla et al.
2010 report this for sparse-spectrum GPs) and would need R separate optimisations. The exact
fit costs O(max_fit_samples^3) once, independent of n.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from gpexplain.kernels.random_features import RandomFeatureKernel
from gpexplain.kernels.rbf import RBF
from gpexplain.models._base import PosteriorEstimator
from gpexplain.models._fitting import OPTIMIZERS
from gpexplain.models._params import (
    Integer,
    Options,
    Seed,
    Variance,
)
from gpexplain.models.gp_regressor import GPRegressor
from gpexplain.posterior.mixture import MixturePosterior
from gpexplain.posterior.random_features import RandomFeaturePosterior

__all__ = ["RandomFeatureGPRegressor"]


class RandomFeatureGPRegressor(
    PosteriorEstimator, RegressorMixin, BaseEstimator
):
    """Sparse-spectrum (random-feature) GP regression, optionally marginalised over draws.

    Model: ``y = f(x) + eps``, ``f(x) = m0 + phi(x) . w``, ``w ~ N(0, I)``,
    ``phi(x) = sqrt(variance / M) [cos(V x), sin(V x)]``, rows of V drawn from
    ``N(0, diag(lengthscale)^-2)`` (the spectral density of the ARD-SE kernel
    ``variance * exp(-0.5 sum_i (x_i - x'_i)^2 / lengthscale_i^2)``), ``eps ~ N(0, noise)``.

    Parameters
    ----------
    n_frequencies : int, default 100
        M, frequencies per model (2M features).
    n_models : int, default 1
        R independent frequency draws. R > 1 gives the marginalised model of Butler et al.
        Sec. 5.5 as a ``MixturePosterior`` (moment-matched: mean of the component means,
        covariance by the law of total covariance).
    lengthscale : float or array-like of shape (n_features,), optional
        ARD-SE lengthscale(s) in the units of X: the first L-BFGS starting point, or the value
        used when ``optimizer=None``. Default start: the column standard deviations.
    variance : float, optional
        Signal variance (squared units of y); start or given value. Default start: var(y).
    noise : float, optional
        Noise variance (squared units of y); start or given value. Default start: 0.1 var(y).
    optimizer : {"lbfgs", None}, default "lbfgs"
        ``"lbfgs"``: hyperparameters by an exact ``GPRegressor`` fit (ML-II, standardised
        inputs and targets, L-BFGS restarts) on at most ``max_fit_samples`` rows. ``None``:
        keep ``lengthscale``, ``variance`` and ``noise`` (all required); the prior mean is
        then the mean of y.
    max_fit_samples : int, default 1000
        Rows (a seeded random subset) used for the exact hyperparameter fit.
    random_state : int, default 0
        Seed of the subset and of the frequencies (independent streams per model).

    Attributes
    ----------
    posterior_ : RandomFeaturePosterior or MixturePosterior
        Posterior in original units (a ``MixturePosterior`` when ``n_models > 1``).
    kernel_ : RBF
        The ARD-SE kernel whose spectral density the frequencies are drawn from (original
        units; ``np.inf`` lengthscale for a column constant in the fitting subset, which the
        random features then ignore).
    kernels_ : list of RandomFeatureKernel
        One per model.
    noise_ : float
    mean_ : float
        Constant prior mean (units of y).
    hyperparameter_model_ : GPRegressor or None
        The exact GP fitted for the hyperparameters (None when ``optimizer=None``).
    feature_names_in_ : list of str
    n_features_in_ : int

    Raises
    ------
    ValueError, TypeError
        From ``fit``: bad inputs (named), bad parameters, missing hyperparameters with
        ``optimizer=None``.
    gpexplain.models.FitError
        From ``fit``: the exact hyperparameter fit failed from every starting point.

    Notes
    -----
    Memory: each model keeps an orthonormal basis of n x 2M floats (8 n 2M R bytes in all);
    fitting costs O(R n M^2). Explanations of a mixture are computed per component and
    combined with ``gpexplain.explain._mixture.mixture_attribution``.
    """

    def __init__(
        self,
        n_frequencies: int = 100,
        n_models: int = 1,
        lengthscale=None,
        variance: float | None = None,
        noise: float | None = None,
        optimizer: str | None = "lbfgs",
        max_fit_samples: int = 1000,
        random_state: int = 0,
    ):
        self._store_parameters(locals())

    _parameter_constraints = {
        "n_frequencies": Integer(1),
        "n_models": Integer(1),
        "max_fit_samples": Integer(2),
        "optimizer": Options(OPTIMIZERS),
        "variance": Variance(),
        "noise": Variance(),
        "random_state": Seed(),
    }

    def _check_params(self) -> None:
        if self.optimizer is None:
            missing = [
                name
                for name in ("lengthscale", "variance", "noise")
                if getattr(self, name) is None
            ]
            if missing:
                raise ValueError(
                    "optimizer=None keeps the given hyperparameters, but "
                    + ", ".join(missing)
                    + " was not given."
                )

    def _hyperparameters(self, X, y, rng, callback) -> tuple[RBF, float, float]:
        """(kernel, noise, prior mean) in original units, given or fitted."""
        if self.optimizer is None:
            self.hyperparameter_model_ = None
            return RBF(self.lengthscale, self.variance), float(self.noise), float(y.mean())
        if X.shape[0] > self.max_fit_samples:
            rows = np.sort(rng.choice(X.shape[0], self.max_fit_samples, replace=False))
            X, y = X[rows], y[rows]
        if self.lengthscale is None:
            spread = X.std(axis=0)
            start_lengthscale = np.where(spread > 0, spread, np.inf)
        else:
            # A vector start keeps GPRegressor's fit ARD (a scalar would tie the lengthscales).
            start_lengthscale = RBF(self.lengthscale)._lengthscales(X.shape[1])
        y_variance = float(y.var()) if y.var() > 0 else 1.0
        start_variance = y_variance if self.variance is None else self.variance
        model = GPRegressor(
            kernel=RBF(start_lengthscale, start_variance),
            noise=self.noise,
            optimizer=self.optimizer,
            random_state=self.random_state,
        )
        # Constant columns and repeated rows are handled (and warned about) by GPRegressor.
        model.fit(X, y, callback=callback)
        self.hyperparameter_model_ = model
        return model.kernel_, model.noise_, model.mean_

    def _fit(self, X, y, names, callback) -> None:
        """Fit (or take) the hyperparameters, draw the frequencies, build the posterior(s)."""
        self._check_params()
        streams = np.random.SeedSequence(self.random_state).spawn(self.n_models + 1)
        kernel, noise, mean = self._hyperparameters(
            X, y, np.random.default_rng(streams[0]), callback
        )
        self.kernel_, self.noise_, self.mean_ = kernel, float(noise), float(mean)
        self.kernels_ = [
            RandomFeatureKernel.from_rbf(
                kernel, self.n_frequencies, X.shape[1], np.random.default_rng(stream)
            )
            for stream in streams[1:]
        ]
        components = [
            RandomFeaturePosterior(X, y, k, self.noise_, mean=self.mean_, feature_names=names)
            for k in self.kernels_
        ]
        self.posterior_ = components[0] if self.n_models == 1 else MixturePosterior(components)
