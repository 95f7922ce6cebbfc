r"""Inductive POE: an explanation *function*, by GP inference (Tadesse et al. 2025, Sec. 4).

Tadesse, Hüyük, Yacoby, Pan and Doshi-Velez, *Transparent trade-offs between properties of
explanations* (2025), optimise an explanation function E: R^D -> R^D for faithfulness,
robustness and smoothness (eq. 5) by GP inference over explanation functions:

* prior (eqs. 6 and 10): ``E = mu 1_D + F``, ``mu ~ N(0, sigma^2)`` (default flat,
  ``sigma^2 = inf``), and F a multi-output GP whose precision is
  ``K^{-1} = (lR / lF) k^{-1} (x) I_D + (lS / lF) delta (x) K~^{-1}``;
* likelihood: gradients at the inducing points z_n observed with independent Gaussian noise,
  ``grad f(z_n) ~ N(E(z_n), I_D / tau_n)``.

**Where this implementation departs from the paper, and why** (``docs/errata.md``,
"POE (Tadesse et al.)"):

1. *Noise.* Proposition 1 takes the noise variance 1/N. The likelihood must instead be a
   Monte Carlo estimate of ``lF * integral |E - grad f|^2 dx`` while ``e^T k_Z^{-1} e``
   already estimates the RKHS norm without any factor of N, so each point gets precision
   ``tau_n = 1 / (N p(z_n))``, with ``p`` the density the inducing points were drawn from
   (``|Omega| / N`` for points uniform on a domain of volume ``|Omega|``; Appendix G's
   importance weights ``(1/|Omega|) / p`` are this ratio). With 1/N the prior's weight
   vanishes as N grows and the explanation tends to the raw gradient. ``noise_variance``
   restores a fixed variance (1/N reproduces the paper).
2. *Smoothness off the inducing points.* eq. 10's ``delta`` term has no closed-form kernel;
   the prior is eq. 10's precision at the inducing points, extended to other points by the
   conditional of the robustness kernel: ``F(x) | F(Z) = (k(x, Z) k_Z^{-1} (x) I) F(Z) +
   N(0, (lF / lR)(k(x, x) - k(x, Z) k_Z^{-1} k(Z, x)) I)``. With ``lS = 0`` this is exactly
   the GP of eq. 10, ``K = (lF / lR) k (x) I_D``.
3. *Proposition 1 is not exact.* The posterior mean at the inducing points, W, minimises
   exactly (with ``k^ = k_Z + jitter I``, ``P = (lR/lF) k^^{-1} (x) I_D + (lS/lF) I_N (x)
   K~^{-1}`` in row-major vec(W), ``p = P 1``)

       J(W) = sum_n tau_n |w_n - g_n|^2 + vec(W)^T P vec(W)
              - (p^T vec(W))^2 / (1^T p + 1 / sigma^2)

   which, multiplied by lF, is in terms of the POE losses (``gpexplain.poe.losses``)

       lF sum_n tau_n |w_n - g_n|^2
       + (lR / 2) R_avg(W; S = -offdiag(k^^{-1})) + (lS / 2) S(W; S~ = -offdiag(K~^{-1}))
       + lF [sum_{n,d} p_nd W_nd^2 - (p^T vec(W))^2 / (1^T p + 1 / sigma^2)],

   with ``p_nd = (lR/lF) (k^^{-1} 1)_n + (lS/lF) (K~^{-1} 1)_d``. The last bracket, which
   the paper's proof drops, is a p-weighted spread of all entries around their common
   p-weighted mean: it shrinks explanations toward each other and does not vanish as N
   grows. ``InductivePOE.objective`` evaluates J; the tests check the equality to 1e-10.

The computation never inverts k_Z: in the eigenbases ``k^ = U diag(e) U^T`` and
``K~ = V diag(m) V^T`` each rotated output channel j has prior covariance
``U diag(e / (rho + beta_j e)) U^T`` (``rho = lR / lF``, ``beta_j = lS / (lF m_j)``), and the
flat mean is handled by generalised least squares (universal kriging), whose uncertainty is
part of the returned covariance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from gpexplain._torch import to_numpy
from gpexplain._validation import as_feature_matrix, check_finite_result
from gpexplain.attribution import Attribution
from gpexplain.poe._inputs import as_lambdas
from gpexplain.poe.target import as_target, evaluate

__all__ = ["InductivePOE", "LocalInducingPoints", "local_inducing_points"]

INDUCTIVE_PROPERTIES = ("F_grad", "R_avg", "S")


@dataclass(frozen=True)
class LocalInducingPoints:
    """Inducing points drawn around each query (Tadesse et al. 2025, Appendix G).

    For a query x: ``n_points`` uniform in the box ``[x - radius, x + radius]`` clipped to the
    domain ``bounds``, plus the optional ``global_points`` (uniform on the domain). Each point
    gets the density of the mixture it was drawn from, so the likelihood carries Appendix G's
    importance weights. Build with ``local_inducing_points``.
    """

    n_points: int
    radius: np.ndarray
    bounds: np.ndarray
    global_points: np.ndarray | None
    seed: int

    @property
    def domain_volume(self) -> float:
        return float(np.prod(self.bounds[1] - self.bounds[0]))

    def around(self, x: np.ndarray, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Inducing points for query x (index seeds the draw) and their sampling densities."""
        rng = np.random.default_rng([self.seed, index])
        low = np.maximum(x - self.radius, self.bounds[0])
        high = np.minimum(x + self.radius, self.bounds[1])
        local = rng.uniform(low, high, size=(self.n_points, x.shape[0]))
        local_volume = float(np.prod(high - low))
        if self.global_points is None:
            return local, np.full(self.n_points, 1.0 / local_volume)
        points = np.vstack([self.global_points, local])
        n_global, total = self.global_points.shape[0], points.shape[0]
        inside = np.all((points >= low) & (points <= high), axis=1)
        density = (n_global / total) / self.domain_volume + (
            (self.n_points / total) / local_volume) * inside
        return points, density


def local_inducing_points(
    n_points: int, radius, bounds, *, global_points=None, seed: int = 0
) -> LocalInducingPoints:
    """Local (optionally global + local) inducing points for ``InductivePOE`` (Appendix G).

    Parameters
    ----------
    n_points : int >= 1
        Local points per query.
    radius : float or array-like (n_features,)
        Half-width R of the box around each query, in the units of x.
    bounds : array-like (2, n_features)
        Lower and upper corners of the domain Omega.
    global_points : array-like (n_global, n_features), optional
        Points uniform on Omega added to every query's set ("global + local").
    seed : int

    Raises
    ------
    ValueError
        Non-positive n_points or radius, bounds with lower >= upper, global points outside.
    """
    bounds = np.asarray(bounds, dtype=np.float64)
    if bounds.ndim != 2 or bounds.shape[0] != 2 or not np.all(bounds[1] > bounds[0]):
        raise ValueError("bounds must be (2, n_features) with lower < upper in every feature.")
    radius = np.broadcast_to(np.asarray(radius, dtype=np.float64), bounds.shape[1:]).copy()
    if not np.all(np.isfinite(radius)) or np.any(radius <= 0):
        raise ValueError(f"radius must be finite and > 0, got {radius!r}.")
    if isinstance(n_points, bool) or not isinstance(n_points, int | np.integer) or n_points < 1:
        raise ValueError(f"n_points must be an integer >= 1, got {n_points!r}.")
    if global_points is not None:
        global_points, _ = as_feature_matrix(global_points, "global_points")
        if global_points.shape[1] != bounds.shape[1] or np.any(global_points < bounds[0]) or (
            np.any(global_points > bounds[1])
        ):
            raise ValueError("global_points must have n_features columns and lie inside bounds.")
    return LocalInducingPoints(int(n_points), radius, bounds, global_points, int(seed))


def _kernel_diagonal(kernel, X: np.ndarray) -> np.ndarray:
    """``k(x, x)`` for each row (the kernel's own ``diag`` when it has one: no M x M matrix)."""
    if hasattr(kernel, "diag"):
        return np.asarray(kernel.diag(X), dtype=np.float64)
    return np.array([float(np.asarray(kernel(x[None], x[None]))[0, 0]) for x in X])


class _Posterior:
    """GP posterior of the explanation function given gradients at one inducing set."""

    def __init__(self, model: InductivePOE, Z, precision, gradients):
        self.Z, self.model = Z, model
        kernel_matrix = np.asarray(model.kernel(Z, Z), dtype=np.float64)
        self.jitter = model.jitter * float(np.mean(np.diag(kernel_matrix)))
        e, self.U = np.linalg.eigh(kernel_matrix + self.jitter * np.eye(Z.shape[0]))
        if e[0] <= 0:
            raise ValueError(
                "the kernel matrix of the inducing points is not positive definite even after "
                f"jitter {model.jitter:g}; increase jitter or remove duplicate points."
            )
        self.e, self.condition_number = e, float(e[-1] / e[0])
        rotated = gradients @ model.V_
        self.channels = []
        alphas, gammas = [], []
        factored = {}  # channels with equal beta (all of them without smoothness) share one
        for j, beta in enumerate(model.betas_):
            if beta not in factored:
                prior = (self.U * (e / (model.rho_ + beta * e))) @ self.U.T
                factor = cho_factor(prior + np.diag(1.0 / precision), lower=True)
                factored[beta] = (prior, factor, cho_solve(factor, np.ones(Z.shape[0])))
            prior, factor, ones_solved = factored[beta]
            alphas.append(cho_solve(factor, rotated[:, j]))
            gammas.append(ones_solved)
            self.channels.append((beta, prior, factor))
        c = model.c_
        self.psi = sum(c[j] ** 2 * gammas[j].sum() for j in range(len(c)))
        self.psi += 1.0 / model.mean_prior_variance
        self.mu = sum(c[j] * alphas[j].sum() for j in range(len(c))) / self.psi
        self.omegas = [alphas[j] - self.mu * c[j] * gammas[j] for j in range(len(c))]

    def at_inducing_points(self) -> np.ndarray:
        """Posterior mean at the inducing points, (N, D)."""
        c = self.model.c_
        rotated = np.column_stack([
            self.mu * c[j] + prior @ self.omegas[j]
            for j, (_, prior, _) in enumerate(self.channels)
        ])
        return rotated @ self.model.V_.T

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean (M, D) and covariance (M, D, D) of E at X."""
        model, c = self.model, self.model.c_
        cross = np.asarray(model.kernel(self.Z, X), dtype=np.float64)  # (N, M)
        k_xx = _kernel_diagonal(model.kernel, X)
        projected = self.U.T @ cross  # (N, M)
        means, variances, shifts = [], [], []
        for j, (beta, _, factor) in enumerate(self.channels):
            r = self.U @ (projected / (model.rho_ + beta * self.e)[:, None])  # Cov(F_Z, F_x)
            means.append(self.mu * c[j] + r.T @ self.omegas[j])
            prior_var = k_xx / model.rho_ - np.sum(
                projected**2 * (beta / (model.rho_ * (model.rho_ + beta * self.e)))[:, None],
                axis=0)
            solved = cho_solve(factor, r)
            variances.append(prior_var - np.sum(r * solved, axis=0))
            shifts.append(c[j] * (1.0 - solved.T @ np.ones(self.Z.shape[0])))
        rotated_mean = np.column_stack(means)
        rotated_cov = np.zeros((X.shape[0], len(c), len(c)))
        rotated_cov[:, np.arange(len(c)), np.arange(len(c))] = np.column_stack(variances)
        u = np.column_stack(shifts)
        rotated_cov += u[:, :, None] * u[:, None, :] / self.psi
        V = model.V_
        return rotated_mean @ V.T, np.einsum("ij,mjk,lk->mil", V, rotated_cov, V)


class InductivePOE:
    r"""Property-optimised explanation functions by GP inference (Tadesse et al. 2025, Sec. 4).

    See the module docstring for the model, the exact objective it minimises at the inducing
    points, and where it departs from the paper (``docs/errata.md``).

    Parameters
    ----------
    kernel : callable ``kernel(A, B) -> (n_A, n_B)``
        Robustness kernel k; the similarity is its negative precision (Appendix A), e.g.
        ``gx.kernels.RBF(lengthscale=0.5)``.
    lambdas : mapping
        Weights of ``"F_grad"`` (> 0), ``"R_avg"`` (> 0) and ``"S"`` (>= 0); other
        properties are transductive only.
    inducing_points : array-like (N, n_features) or LocalInducingPoints
        An array: points uniform on the domain, shared by all queries ("global"). A
        ``local_inducing_points(...)`` spec: points drawn around each query ("local", or
        "global + local"), with Appendix G's importance weights.
    domain_volume : float, optional
        |Omega| for global points (default: the volume of their bounding box). The
        faithfulness term integrates over Omega while the robustness term (an RKHS norm) does
        not, so lR / lF is a weight *per unit volume* of the inputs: for a domain whose volume
        is far from 1 (e.g. standardised inputs in many dimensions) scale the weights with
        |Omega|, or fix ``noise_variance``.
    feature_kernel : array-like (n_features, n_features), optional
        Positive definite K~ whose negative precision is the feature similarity; required
        when ``lambdas["S"] > 0``.
    mean_prior_variance : float, default inf
        sigma^2 of the shared mean mu (inf: flat prior, as in the paper's limit).
    noise_variance : float, optional
        Fixed observation noise variance (e.g. 1/N as in Proposition 1) instead of
        ``1 / (N p(z_n))``.
    jitter : float, default 1e-10
        Added to k_Z's diagonal, relative to its mean diagonal entry.

    Attributes (after ``fit``, global inducing points)
    -----------------------------------------------------
    inducing_points_ : ndarray (N, n_features)
    inducing_gradients_ : ndarray (N, n_features)
    inducing_explanations_ : ndarray (N, n_features)
        Posterior mean at the inducing points (the minimiser of ``objective``).
    precision_ : ndarray (N,)
        Likelihood precision tau_n of each inducing point.
    condition_number_ : float
        Of the jittered kernel matrix k_Z.
    """

    def __init__(self, kernel, lambdas, inducing_points, domain_volume=None, *,
                 feature_kernel=None, mean_prior_variance: float = np.inf,
                 noise_variance: float | None = None, jitter: float = 1e-10):
        self.kernel = kernel
        self.lambdas = lambdas
        self.inducing_points = inducing_points
        self.domain_volume = domain_volume
        self.feature_kernel = feature_kernel
        self.mean_prior_variance = mean_prior_variance
        self.noise_variance = noise_variance
        self.jitter = jitter

    # -- validation ---------------------------------------------------------------------
    def _validate(self) -> None:
        if not callable(self.kernel):
            raise TypeError("kernel must be a callable kernel(A, B) -> (n_A, n_B) matrix, e.g. "
                            "gx.kernels.RBF(lengthscale=0.5).")
        weights = as_lambdas(self.lambdas, allowed=INDUCTIVE_PROPERTIES)
        if weights["F_grad"] <= 0 or weights["R_avg"] <= 0:
            raise ValueError("inductive POE needs lambdas['F_grad'] > 0 and lambdas['R_avg'] "
                             "> 0 (the GP's likelihood and prior); use gx.poe.transductive "
                             "otherwise.")
        sigma2 = self.mean_prior_variance
        if isinstance(sigma2, bool) or not isinstance(sigma2, int | float) or not sigma2 > 0:
            raise ValueError(f"mean_prior_variance must be a number > 0 (inf for a flat prior), "
                             f"got {sigma2!r}.")
        if not (isinstance(self.jitter, int | float) and np.isfinite(self.jitter)
                and self.jitter >= 0):
            raise ValueError(f"jitter must be a finite number >= 0, got {self.jitter!r}.")
        if self.noise_variance is not None and not (
                np.isfinite(self.noise_variance) and self.noise_variance > 0):
            raise ValueError(f"noise_variance must be finite and > 0, got {self.noise_variance!r}.")
        self.weights_ = weights
        self.rho_ = weights["R_avg"] / weights["F_grad"]
        if isinstance(self.inducing_points, LocalInducingPoints):
            n_features = self.inducing_points.bounds.shape[1]
            self.inducing_points_ = None
        else:
            self.inducing_points_, _ = as_feature_matrix(self.inducing_points, "inducing_points",
                                                         min_rows=2)
            n_features = self.inducing_points_.shape[1]
        self._features(weights, n_features)

    def _features(self, weights, n_features: int) -> None:
        if weights["S"] > 0:
            if self.feature_kernel is None:
                raise ValueError("lambdas['S'] > 0 needs feature_kernel (a positive definite "
                                 f"({n_features}, {n_features}) matrix K~).")
            K = np.asarray(to_numpy(self.feature_kernel), dtype=np.float64)
            if K.shape != (n_features, n_features) or not np.all(np.isfinite(K)) or (
                    np.max(np.abs(K - K.T)) > 1e-12 * np.max(np.abs(K))):
                raise ValueError(f"feature_kernel must be a finite symmetric ({n_features}, "
                                 f"{n_features}) matrix.")
            m, V = np.linalg.eigh(K)
            if m[0] <= 0:
                raise ValueError("feature_kernel must be positive definite.")
            self.betas_ = weights["S"] / (weights["F_grad"] * m)
            self.V_ = V
        else:
            self.betas_ = np.zeros(n_features)
            self.V_ = np.eye(n_features)
        self.c_ = self.V_.T @ np.ones(n_features)

    def _precision(self, n: int, density: np.ndarray | None) -> np.ndarray:
        if self.noise_variance is not None:
            return np.full(n, 1.0 / self.noise_variance)
        return 1.0 / (n * density)

    # -- public API ---------------------------------------------------------------------
    def fit(self, gradient_function) -> InductivePOE:
        """Observe the gradients of the explained function at the inducing points.

        Parameters
        ----------
        gradient_function : GP model/posterior, torch callable f, ``(f, grad_f)`` pair, a
            ``gx.poe.Target``, or a NumPy callable ``X -> grad f(X)`` (n, n_features)
            wrapped as ``gx.poe.Target(None, grad_f)``.

        Returns
        -------
        self

        Raises
        ------
        ValueError, TypeError
            Bad parameters (see the class), or gradients of the wrong shape.
        """
        self._validate()
        self.target_ = as_target(gradient_function)
        if self.inducing_points_ is None:
            return self
        Z = self.inducing_points_
        if self.domain_volume is None:
            volume = float(np.prod(Z.max(axis=0) - Z.min(axis=0)))
        else:
            volume = float(self.domain_volume)
        if not (np.isfinite(volume) and volume > 0):
            raise ValueError(f"domain_volume must be finite and > 0, got {volume!r}.")
        self.domain_volume_ = volume
        self.precision_ = self._precision(Z.shape[0], np.full(Z.shape[0], 1.0 / volume))
        self.inducing_gradients_ = evaluate(self.target_, Z, "gradients")
        self._posterior = _Posterior(self, Z, self.precision_, self.inducing_gradients_)
        self.condition_number_ = self._posterior.condition_number
        self.inducing_explanations_ = self._posterior.at_inducing_points()
        return self

    def explain(self, X_new, *, feature_names=None) -> Attribution:
        """Explanations E(x) at new points, with the GP's posterior covariance.

        Returns
        -------
        Attribution
            ``mean`` (n_points, n_features) posterior mean of E, ``cov`` (n_points,
            n_features, n_features) its posterior covariance (including the uncertainty of
            the shared mean), ``prediction`` f(x) when the target has values (else zeros).

        Raises
        ------
        ValueError
            Not fitted, or X_new with the wrong number of features.
        """
        if not hasattr(self, "target_"):
            raise ValueError("InductivePOE is not fitted yet; call fit(gradient_function).")
        X, names = as_feature_matrix(X_new, "X_new", feature_names)
        if X.shape[1] != self.V_.shape[0]:
            raise ValueError(f"X_new has {X.shape[1]} features; the inducing points have "
                             f"{self.V_.shape[0]}.")
        if self.inducing_points_ is not None:
            mean, cov = self._posterior.predict(X)
        else:
            mean, cov = np.empty(X.shape), np.empty((X.shape[0], X.shape[1], X.shape[1]))
            spec = self.inducing_points
            for index, x in enumerate(X):
                Z, density = spec.around(x, index)
                precision = self._precision(Z.shape[0], density)
                posterior = _Posterior(self, Z, precision,
                                       evaluate(self.target_, Z, "gradients"))
                mean[index], cov[index] = (part[0] for part in posterior.predict(x[None]))
        check_finite_result("inductive POE", mean, cov)
        prediction = (evaluate(self.target_, X, "values") if self.target_.values is not None
                      else np.zeros(X.shape[0]))
        return Attribution(mean, 0.5 * (cov + np.swapaxes(cov, 1, 2)), X, prediction, None,
                           None, names, "POE inductive (GP inference)")

    def objective(self, W) -> float:
        """The objective J(W) whose exact minimiser is ``inducing_explanations_``.

        ``J(W) = sum_n tau_n |w_n - g_n|^2 + vec(W)^T P vec(W) - (p^T vec W)^2 /
        (1^T p + 1/sigma^2)`` (module docstring, item 3), at the global inducing points.

        Raises
        ------
        ValueError
            Not fitted with global inducing points, or W of the wrong shape.
        """
        if getattr(self, "inducing_points_", None) is None or not hasattr(self, "_posterior"):
            raise ValueError("objective needs a fit with global inducing points.")
        W = np.asarray(W, dtype=np.float64)
        if W.shape != self.inducing_points_.shape:
            raise ValueError(f"W must have shape {self.inducing_points_.shape}, got {W.shape}.")
        posterior = self._posterior
        kernel_inverse = (posterior.U / posterior.e) @ posterior.U.T
        feature_precision = (self.V_ * (self.betas_)) @ self.V_.T  # (lS/lF) K~^{-1}
        quadratic = self.rho_ * np.sum(W * (kernel_inverse @ W)) + np.sum(
            W * (W @ feature_precision))
        p = (self.rho_ * kernel_inverse.sum(axis=1)[:, None]
             + feature_precision.sum(axis=1)[None, :])
        shrink = float(np.sum(p * W)) ** 2 / (p.sum() + 1.0 / self.mean_prior_variance)
        fit = float(np.sum(self.precision_[:, None] * (W - self.inducing_gradients_) ** 2))
        return fit + quadratic - shrink
