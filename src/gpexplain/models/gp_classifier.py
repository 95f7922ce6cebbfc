"""``GPClassifier``: sparse variational GP classification with GPyTorch, explainable latents.

Binary targets (Seitz 2022, Sec. 5 and App. B; Hensman, Matthews and Ghahramani, "Scalable
variational Gaussian process classification", 2015): one latent GP f, the log-odds (logit
link) or probit of ``classes_[1]``, ``p(y = classes_[1] | f) = sigma(f)`` with
``sigma`` the logistic function or the standard normal CDF. Multiclass targets (Seitz 2022,
eqs. 25-26): C independent latent GPs ``f_1..f_C`` (one per class, own kernel, mean and
inducing points; no mixing of latents) and ``p(y = c | f) = S_c(f) = exp(f_c) / sum_j
exp(f_j)``. Each latent is a whitened SVGP, ``q(u_c) = N(m0_c + Lz m_v, Lz S_v Lz^T)``,
whose marginal ``q(f_c(x)) = N(m_c(x), v_c(x))`` is a ``VariationalPosterior``.

Training maximises the evidence lower bound over everything (kernel hyperparameters,
constant means, inducing locations, q(u)) with full-batch L-BFGS from seeded starts:

    ELBO = sum_i E_{q(f(x_i))}[log p(y_i | f(x_i))] - sum_c KL(q(v_c) || N(0, I)).

The expectations are deterministic quadratures of the likelihood (``gpexplain.likelihoods``:
``Bernoulli`` for the binary links, ``Categorical`` for the softmax), so a fit is a function
of its seed. ``predict_proba`` asks the same likelihood for the class probabilities, which it
computes by the link's expectations (``gpexplain.links``): the numbers the probability-level
explanations report as ``prediction``.

Inputs are standardised internally; the latent posteriors are reported in the original units
of X exactly (lengthscales times column standard deviations; Z un-standardised; the latent is
not rescaled, so the whitened ``m_v, S_v`` carry over unchanged).
"""

from __future__ import annotations

import warnings

import gpytorch
import numpy as np
import torch
from linear_operator.utils.warnings import NumericalWarning
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from gpexplain._torch import as_tensor, to_numpy
from gpexplain._validation import as_class_labels, as_feature_matrix
from gpexplain.kernels import RBF
from gpexplain.likelihoods import likelihood_for_link
from gpexplain.links import LINKS
from gpexplain.models._base import PosteriorEstimator
from gpexplain.models._fitting import (
    FitError,
    best_of_starts,
    log_uniform,
    minimise_keeping_best,
)
from gpexplain.models._kernel_choices import kernel_choice
from gpexplain.models._params import Integer, Options, PositiveNumber, Seed
from gpexplain.models._standardisation import FeatureScaling, choice_scaling
from gpexplain.models._svgp import INDUCING_INITS, SVGPModel, initial_inducing_points
from gpexplain.posterior.variational import VariationalPosterior

__all__ = ["GPClassifier", "default_n_inducing"]

OPTIMIZERS = ("lbfgs", None)
# Inducing points per latent of GPClassifier(n_inducing=None): at most MAX_INDUCING, a
# budget of INDUCING_BUDGET shared out among several latents, at least MIN_INDUCING each.
MAX_INDUCING, INDUCING_BUDGET, MIN_INDUCING = 64, 256, 32


def default_n_inducing(n_rows: int, n_latents: int) -> int:
    """Inducing points per latent of ``GPClassifier(n_inducing=None)``:
    ``min(n_rows, max(32, min(64, 256 // n_latents)))``.

    64 for up to 4 latents, then a budget of 256 shared among the latents, at least 32 each
    (32 per digit for the 10 digits): the variational parameters grow with C M^2 and L-BFGS
    needs more iterations for more of them, while each class's latent needs fewer points to
    separate its class than one latent needs for all (the digits: 16, 32 and 64 per class
    gave 0.973, 0.976 and 0.971 held-out accuracy; benchmarks/classifier_fit_speed.py).
    """
    return min(n_rows, max(MIN_INDUCING, min(MAX_INDUCING, INDUCING_BUDGET // n_latents)))


class GPClassifier(PosteriorEstimator, ClassifierMixin, BaseEstimator):
    """Sparse variational Gaussian-process classifier (binary or multiclass), GPyTorch, float64.

    Binary targets: one latent GP, ``p(y = classes_[1] | f) = sigma(f)`` (logistic or
    probit link). Multiclass targets (or ``link="softmax"``): one independent latent GP per
    class and a softmax likelihood (Seitz 2022, "Gradient-based explanations for Gaussian
    process regression and classification models", eqs. 25-26). Each latent is a whitened
    SVGP with inducing points initialised by k-means (Seitz 2022, App. B; Hensman et al.
    2015); the ELBO's expected log likelihood is computed by deterministic quadrature (module
    docstring), so fits are reproducible.

    Parameters
    ----------
    kernel : {"ard", "isotropic", "matern52", "matern32", "rq"}, gx.kernels.RBF or
        gpytorch.kernels.Kernel, default "ard"
        Prior covariance of every latent (each latent fits its own hyperparameters), as in
        ``GPRegressor``. An ``RBF`` instance (original units of X, variance in squared
        latent units) is the initial value, or the final kernel when ``optimizer=None``.
    link : {"logit", "probit", "softmax"}, default "logit"
        Binary targets: the logistic or the probit link of one latent; "softmax" fits two
        latents with a softmax (the paper's 2-class comparison). More than two classes
        always use the softmax ("logit" means its multiclass generalisation; "probit" is
        refused).
    inference : {"variational"}, default "variational"
        Sparse variational inference (the only one implemented).
    n_inducing : int or None, default None
        Inducing points per latent M, at most the number of training rows. Cost per ELBO
        evaluation O(C (n M^2 + M^3)) for C latents. None chooses it from the rows n and the
        latents C (``default_n_inducing``): ``min(n, 64)`` up to 4 latents, fewer per latent
        above (``min(n, max(32, 256 // C))``, 32 per digit for the 10 digits).
    inducing_init : {"kmeans", "random"}, default "kmeans"
        Initial inducing locations (k-means centres or a random subset of the rows).
    n_restarts : int, default 0
        Random restarts after the first start (lengthscales and output scale drawn
        log-uniformly in [0.1, 10] times the first start's); the best final ELBO wins.
    optimizer : {"lbfgs", None}, default "lbfgs"
        Full-batch L-BFGS on the ELBO over every parameter. None keeps the given kernel
        (``kernel=gx.kernels.RBF(...)`` required), a zero prior mean and the initial inducing
        points, and optimises only q(u).
    max_iter : int, default 200
        L-BFGS iterations per start.
    tol : float or None, default 1e-4
        Convergence tolerance: a start stops once its ELBO has improved by less than ``tol``
        nats per training row over the last 10 L-BFGS evaluations (keeping the best point
        evaluated). None runs ``max_iter`` iterations (or to L-BFGS's own stop).
    random_state : int, default 0
        Seed of the inducing points, the variational initialisation and the restarts (the
        global random states are left untouched).

    Attributes
    ----------
    classes_ : ndarray (n_classes,)
        The class labels, sorted.
    link_ : {"logit", "probit", "softmax"}
        The link of the fitted model.
    posterior_ : VariationalPosterior
        Binary links only: the latent posterior, the log-odds (logit) or probit of
        ``classes_[1]``, original units of X.
    posteriors_ : list of VariationalPosterior
        Softmax only: the C independent latent posteriors, in ``classes_`` order.
    kernels_ : list of kernels
        The fitted kernel of each latent, original units of X.
    inducing_points_ : list of ndarray (n_inducing, n_features)
        Fitted inducing locations per latent, original units.
    elbo_ : float
        Final ELBO of the chosen start (nats, summed over the training rows).
    restarts_ : list of dict
        Per start: ``start``, ``log_marginal_likelihood`` (its final ELBO, None when
        discarded) and ``stopped_early``.
    gpytorch_models_ : torch.nn.ModuleList of gpytorch ApproximateGP
        The trained latent SVGPs, in standardised units of X (eval mode, float64); None
        after ``gx.load`` (predictions and explanations use the posteriors).
    constant_features_, feature_names_in_, n_features_in_
        As for the regressors.

    Raises
    ------
    InvalidParameterError
        From ``fit``: a parameter outside its declared values (e.g. an unknown link).
    ValueError, TypeError
        From ``fit``: bad X (named), fewer than 2 rows, y with one class only, missing or
        continuous labels, probit with more than two classes, ``n_inducing`` above the
        number of rows, an unknown kernel, or ``optimizer=None`` without a given RBF.
    FitError
        From ``fit``: every start diverged to non-finite values.
    """

    _not_saved = ("gpytorch_models_",)  # training-time modules; see persistence.py
    _parameter_constraints = {
        "link": Options(LINKS.names()),
        "inference": Options(("variational",)),
        "n_inducing": Integer(1, allow_none=True),
        "inducing_init": Options(INDUCING_INITS),
        "n_restarts": Integer(0),
        "optimizer": Options(OPTIMIZERS),
        "max_iter": Integer(1),
        "tol": PositiveNumber(allow_none=True),
        "random_state": Seed(),
    }

    def __init__(
        self,
        kernel="ard",
        link: str = "logit",
        inference: str = "variational",
        n_inducing: int | None = None,
        inducing_init: str = "kmeans",
        n_restarts: int = 0,
        optimizer: str | None = "lbfgs",
        max_iter: int = 200,
        tol: float | None = 1e-4,
        random_state: int = 0,
    ):
        self._store_parameters(locals())

    def _validate_data(self, X, y, name: str = "X", min_rows: int = 2):
        X, names = as_feature_matrix(X, name, min_rows=min_rows)
        labels = as_class_labels(y, X.shape[0])
        self._record_features(names)
        return X, labels, names

    # -- fitting ------------------------------------------------------------------------
    def _link_for(self, n_classes: int) -> str:
        if n_classes < 2:
            raise ValueError(
                "y has one class only; a classifier needs at least two classes in y."
            )
        if n_classes == 2:
            return self.link
        if self.link == "probit":
            raise ValueError(
                f"link='probit' is binary; y has {n_classes} classes: use link='softmax' "
                "(or 'logit', its multiclass generalisation)."
            )
        return "softmax"

    def _fit(self, X, y, names, callback) -> None:
        """Fit the latent SVGPs and build their posteriors (data and parameters validated)."""
        classes, codes = np.unique(y, return_inverse=True)
        link = self._link_for(classes.size)
        likelihood = likelihood_for_link(link)
        choice = kernel_choice(self.kernel)
        if self.optimizer is None and not isinstance(self.kernel, RBF):
            raise ValueError("optimizer=None needs kernel=gx.kernels.RBF(...) with its values.")
        if self.n_inducing is not None and self.n_inducing > X.shape[0]:
            raise ValueError(
                f"n_inducing={self.n_inducing} exceeds the {X.shape[0]} training rows; use at "
                f"most {X.shape[0]}."
            )
        n_latent = likelihood.n_latents(classes.size)
        n_inducing = (default_n_inducing(X.shape[0], n_latent) if self.n_inducing is None
                      else self.n_inducing)
        constant, scaling = choice_scaling(X, names, choice.sees_constant_columns)
        Xs = scaling.features(X)
        rng = np.random.default_rng(self.random_state)
        Z_t = as_tensor(initial_inducing_points(Xs, n_inducing, self.inducing_init, rng))
        X_t = as_tensor(Xs)
        tolerance = None if self.tol is None else self.tol * X.shape[0]
        target = likelihood.targets(codes)
        starts = self._starting_points(choice, choice.is_ard(self.optimizer), scaling, rng)
        shape_rng = np.random.default_rng([self.random_state, 1])  # RQ shapes of restarts

        def elbo(latents):
            moments = [latent(X_t) for latent in latents]
            mean = torch.stack([q.mean for q in moments])
            var = torch.stack([q.variance for q in moments])
            kl = sum(latent.variational_strategy.kl_divergence() for latent in latents)
            return likelihood.expected_log_likelihood(mean, var, target) - kl

        def optimise(index, start):
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.random_state + index)
                latents = torch.nn.ModuleList(
                    SVGPModel(Z_t.clone(), choice.module(start, index, shape_rng))
                    for _ in range(n_latent)
                ).double()
                if self.optimizer is None:  # only q(u) is fitted
                    for parameter_name, parameter in latents.named_parameters():
                        parameter.requires_grad_("variational_distribution" in parameter_name)
                    for latent in latents:
                        latent.mean_module.constant.data.zero_()
                with gpytorch.settings.max_cholesky_size(10**9), warnings.catch_warnings():
                    # Jitter added far from the optimum is expected, not news.
                    warnings.simplefilter("ignore", category=NumericalWarning)
                    stopped_early = minimise_keeping_best(
                        latents, lambda: -elbo(latents), self.max_iter, callback, index,
                        len(starts), tolerance,
                    )
            if stopped_early is None or not all(
                bool(torch.all(torch.isfinite(p))) for p in latents.parameters()
            ):
                return None
            return latents, stopped_early

        def final_elbo(latents):
            with torch.no_grad(), gpytorch.settings.max_cholesky_size(10**9):
                value = float(elbo(latents))
            if not np.isfinite(value):
                raise ValueError("non-finite ELBO")
            return value

        self.elbo_, latents, self.restarts_ = best_of_starts(
            starts, optimise, final_elbo, "lower max_iter, or rescale the data."
        )
        self.classes_, self.link_ = classes, link
        self.gpytorch_models_ = latents
        self.constant_features_ = [names[i] for i in np.flatnonzero(constant)]
        posteriors, self.kernels_, self.inducing_points_ = [], [], []
        for latent in latents:
            latent.eval()
            strategy = latent.variational_strategy
            q = strategy.variational_distribution
            kernel = choice.original_units(
                latent.covar_module, X.shape[1], scaling.active, scaling.x_mean, scaling.x_scale,
                1.0, self.optimizer,
            )
            inducing_points = scaling.unstandardise(to_numpy(strategy.inducing_points))
            self.kernels_.append(kernel)
            self.inducing_points_.append(inducing_points)
            posteriors.append(VariationalPosterior(
                inducing_points,
                to_numpy(q.mean),
                to_numpy(q.covariance_matrix),
                kernel,
                float(latent.mean_module.constant.detach()),
                whitened=True,
                jitter=strategy.jitter_val,
                data_inputs=X,
                feature_names=names,
            ))
        if link == "softmax":
            self.posteriors_ = posteriors
        else:
            (self.posterior_,) = posteriors

    def _starting_points(self, choice, ard: bool, scaling: FeatureScaling, rng) -> list:
        """(lengthscale, output scale, unused) of every start, standardised units.

        Without given values the first start's lengthscales are sqrt(n_features) standardised
        units (a typical distance between standardised rows), output scale 1.
        """
        lengthscale, outputscale = choice.first_start(scaling, ard, 1.0)
        if not choice.has_values:
            lengthscale = lengthscale * np.sqrt(scaling.active.size)
        starts = [(lengthscale, outputscale, None)]
        for _ in range(self.n_restarts if self.optimizer else 0):
            starts.append((
                lengthscale * log_uniform(rng, 0.1, 10.0, size=lengthscale.shape),
                outputscale * float(log_uniform(rng, 0.1, 10.0)),
                None,
            ))
        return starts

    # -- prediction ---------------------------------------------------------------------
    def _latent_moments(self, X) -> tuple[np.ndarray, np.ndarray]:
        """Latent posterior means and variances, each (n_latents, n_points)."""
        check_is_fitted(self, "link_")
        posteriors = self.posteriors_ if self.link_ == "softmax" else [self.posterior_]
        moments = [posterior.predict(X) for posterior in posteriors]
        return np.stack([m for m, _ in moments]), np.stack([v for _, v in moments])

    def decision_function(self, X) -> np.ndarray:
        """Latent posterior mean(s) at X.

        Parameters
        ----------
        X : array-like of shape (n_points, n_features), original units

        Returns
        -------
        ndarray (n_points,) for a binary link (log-odds or probit of ``classes_[1]``), or
        (n_points, n_classes) for the softmax (one latent per class).

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        ValueError
            Wrong number of columns, non-finite values, or mismatched column names.
        """
        mean, _ = self._latent_moments(X)
        return mean.T if self.link_ == "softmax" else mean[0]

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities E[p(y = c | f(x))], averaged over the latent posterior.

        Not the plug-in ``sigma(m(x))``: the likelihood's class probabilities by the link's
        expectations (``gpexplain.links``), equal to the ``prediction`` of
        ``gx.integrated_gradients(model, X, output="probability", target_class=c)``: probit
        in closed form, ``Phi(m / sqrt(1 + v))``; logit by adaptive Gauss-Hermite or a
        trapezoid rule in the latent value (converged to 1e-12); softmax by the product
        trapezoid over class differences (about 1e-12) for up to 3 classes, and randomised
        quasi-Monte Carlo (8 x 4096 scrambled Sobol points, seed 0) above.

        Parameters
        ----------
        X : array-like of shape (n_points, n_features), original units

        Returns
        -------
        ndarray (n_points, n_classes), columns in ``classes_`` order, rows summing to 1.

        Raises
        ------
        sklearn.exceptions.NotFittedError, ValueError
            As ``decision_function``.
        """
        mean, var = self._latent_moments(X)
        probabilities = likelihood_for_link(self.link_).predict_proba(mean, var)
        if not np.all(np.isfinite(probabilities)):
            raise FitError("non-finite class probabilities; the fitted posterior is degenerate.")
        return probabilities

    def predict(self, X) -> np.ndarray:
        """The most probable class under ``predict_proba``, (n_points,) labels from ``classes_``.

        Raises
        ------
        sklearn.exceptions.NotFittedError, ValueError
            As ``decision_function``.
        """
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
