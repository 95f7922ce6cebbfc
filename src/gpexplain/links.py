"""Gaussian expectations of a classifier's link function and of its derivatives.

A GP classifier predicts through a link: ``p(x) = sigma(f(x))`` (binary: logistic or probit
sigma, latent f = log-odds of the positive class) or ``p_c(x) = S_c(f_1(x), ..., f_C(x))``
(softmax over C independent latent GPs). Under the latent Gaussian posterior the class
probability and its input gradient are not Gaussian; what is exact is their expectation.
Seitz, *Gradient-based explanations for Gaussian process regression and classification models*
(2022), Sec. 5, eqs. 27-30, with the corrections of docs/errata.md:

* binary, f ~ N(m, s2), ``g = grad f`` jointly Gaussian with ``E g = mu``,
  ``Cov(f, g_k) = c_k``, ``Cov(g) = G``; by Stein's lemma (no division by s2)

      E[d p / dx_k]        = mu_k E[sigma'(f)] + c_k E[sigma''(f)],

  and, beyond the paper, the full feature-by-feature second moment (condition g on f and use
  Stein's lemma twice on ``h = sigma'^2``)

      E[sigma'(f)^2 g g^T] = E[h] (G + mu mu^T) + (mu c^T + c mu^T) E[h'] + c c^T E[h''];

  every expectation is one-dimensional: Gauss-Hermite with the node count doubled until two
  successive rules agree to 1e-12 (logistic, latent variance <= 1; above, a trapezoid rule in
  the latent value, its step halved until converged), closed forms (probit:
  ``E[Phi(f)] = Phi(m / sqrt(1 + s2))`` and its derivatives in m);
* softmax, independent ``f_j ~ N(m_j, s2_j)`` with gradients ``g_j`` (``Cov(f_j, g_jk) =
  c_jk``): ``E[d S_c / dx_k] = sum_j mu_jk E[d_j S_c] + c_jk E[d_j^2 S_c]`` with
  ``d_j S_c = S_c (delta_jc - S_j)`` and ``d_j^2 S_c = S_c ((delta_jc - S_j)^2 - S_j (1 - S_j))``;
  beyond the paper, the feature-by-feature covariance of ``d S_c / dx``
  (``Softmax.gradient_covariance``: Stein's lemma per latent, derivatives of S up to the
  third, no division by a variance). S depends on the latents only through their
  differences, so for C <= ``max_tensor_classes`` the expectations are (C-1)-dimensional: a
  product trapezoid over the Cholesky-whitened differences whose step resolves the softmax's
  unit-width transitions at any latent variance (1e-10 at latent variances of 1e2 and more;
  ``_difference_rule``); above, randomised quasi-Monte Carlo (scrambled Sobol,
  ``scipy.stats.qmc``) with a standard error.

``approximation="taylor"`` reproduces the paper's second-order Taylor forms instead (eq. 33 as
corrected in docs/errata.md: ``sigma'(m) mu_k + (s2/2) sigma'''(m) mu_k + c_k sigma''(m)``;
eq. 37 for softmax, its Hessian by automatic differentiation), for comparison only: they err
by more than 10% once s2 approaches 1.
"""

from __future__ import annotations

import warnings
from functools import cache

import numpy as np
from scipy.special import expit, log_softmax, ndtr, ndtri, roots_hermite
from scipy.stats import qmc

__all__ = ["Link", "Logit", "Probit", "Softmax", "get_link", "LINK_NAMES"]

LINK_NAMES = ("logit", "probit", "softmax")
APPROXIMATIONS = ("quadrature", "taylor")
_TOLERANCE = 1e-12
_BINARY_NODES = (32, 64, 128, 256, 512, 1024)
_MAX_TENSOR_SIZE = 2**21  # float64 node values per batch of points (softmax rules)
_SQRT_2PI = np.sqrt(2.0 * np.pi)
# Logistic link, latent variances above this: a trapezoid rule in the latent value instead of
# Gauss-Hermite (which needs thousands of nodes once the Gaussian is much wider than sigma').
_WIDE_VARIANCE = 1.0
_HALF_WIDTH = 40.0  # sigma' and its derivatives are below 5e-18 beyond |f| = 40
_TRAPEZOID_STEPS = (0.5, 0.25, 0.125, 0.0625)
# Bivariate expectations: a tensor trapezoid rule in the standardised coordinates of a pivoted
# Cholesky factor, on [-8.5, 8.5]^2 (the N(0, 1) mass outside is below 2e-17), with
# 2^j + 1 nodes per axis (j = 4 .. 10) until two successive rules agree to 1e-12.
_PAIR_HALF_WIDTH = 8.5
_PAIR_NODES = tuple(2**j + 1 for j in range(4, 11))
_PAIR_BATCH = 2**21  # float64 grid values per batch of pairs
#: The orders (p, q) of ``E[sigma^(p)(a) sigma^(q)(b)]`` that the covariance of
#: probability-level integrated gradients needs (second-order Stein on sigma'(a) sigma'(b)).
PAIR_ORDERS = ((1, 1), (2, 1), (1, 2), (3, 1), (2, 2), (1, 3))


@cache
def _hermite_rule(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``sqrt(2) x_i`` and weights ``w_i / sqrt(pi)`` of an expectation over N(0, 1).

    scipy's rule, which switches to an asymptotic construction for many nodes (NumPy's
    ``hermgauss`` overflows above a few hundred)."""
    nodes, weights = roots_hermite(n_nodes)
    return np.sqrt(2.0) * nodes, weights / np.sqrt(np.pi)


def _check_approximation(approximation: str) -> str:
    if approximation not in APPROXIMATIONS:
        raise ValueError(
            f"approximation must be one of {APPROXIMATIONS}, got {approximation!r}."
        )
    return approximation


def _as_moments(mean, var, name_mean="mean", name_var="var"):
    mean = np.asarray(mean, dtype=np.float64)
    var = np.asarray(var, dtype=np.float64)
    if mean.shape != var.shape:
        raise ValueError(
            f"{name_mean} and {name_var} must have the same shape, got {mean.shape} and "
            f"{var.shape}."
        )
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(var))):
        raise ValueError(f"{name_mean} and {name_var} must be finite.")
    if np.any(var < 0):
        raise ValueError(f"{name_var} must be >= 0 (a variance), got min {var.min():g}.")
    return mean, var


def _check_gradient_moments(mean, grad_mean, grad_cov, lead: tuple[int, ...]):
    grad_mean = np.asarray(grad_mean, dtype=np.float64)
    grad_cov = np.asarray(grad_cov, dtype=np.float64)
    if grad_mean.ndim != len(lead) + 1 or grad_mean.shape[:-1] != lead:
        raise ValueError(
            f"grad_mean must have shape {lead + ('n_features',)}, got {grad_mean.shape}."
        )
    if grad_cov.shape != grad_mean.shape:
        raise ValueError(
            f"grad_cov (Cov(f, df/dx_k)) must have the shape of grad_mean {grad_mean.shape}, "
            f"got {grad_cov.shape}."
        )
    if not (np.all(np.isfinite(grad_mean)) and np.all(np.isfinite(grad_cov))):
        raise ValueError("grad_mean and grad_cov must be finite.")
    return grad_mean, grad_cov


def gauss_hermite_expectations(function, mean: np.ndarray, var: np.ndarray,
                               tolerance: float = _TOLERANCE, what: str = "expectation"):
    """``E[function(f)]`` for f ~ N(mean, var) elementwise, by adaptive Gauss-Hermite.

    ``function`` maps an array of latent values (..., n_nodes) to a stacked array
    (n_outputs, ..., n_nodes). The node count doubles (32 .. 1024) until two successive rules
    agree to ``tolerance`` everywhere; otherwise a ``RuntimeWarning`` reports the gap.

    Returns
    -------
    ndarray (n_outputs, ...)
    """
    scale = np.sqrt(var)[..., None]

    def rule(n_nodes):
        nodes, weights = _hermite_rule(n_nodes)
        return function(mean[..., None] + scale * nodes) @ weights

    return _refine(_BINARY_NODES, rule, tolerance, lambda n_nodes, gap: (
        f"Gauss-Hermite {what} did not converge to {tolerance:g} with {n_nodes} nodes "
        f"(change between the last two rules {gap:.3g}); a latent variance of "
        f"{float(np.max(var)):.3g} is very wide for the link."
    ))


def _refine(node_counts, rule, tolerance: float, failure):
    """``rule(n)`` for growing node counts until two successive results agree to
    ``tolerance``; otherwise the last one, with a ``RuntimeWarning`` ``failure(n, gap)``."""
    previous = None
    for n_nodes in node_counts:
        current = rule(n_nodes)
        if previous is not None:
            gap = float(np.max(np.abs(current - previous), initial=0.0))
            if gap <= tolerance:
                return current
        previous = current
    warnings.warn(failure(n_nodes, gap), RuntimeWarning, stacklevel=4)
    return current


class Link:
    """A link's Gaussian expectations (abstract base; see ``Logit``, ``Probit``, ``Softmax``).

    Parameters
    ----------
    approximation : {"quadrature", "taylor"}, default "quadrature"
        ``"quadrature"``: the exact expectations (closed form or converged quadrature).
        ``"taylor"``: the paper's second-order Taylor approximations, for comparison only.
    """

    name = ""

    def __init__(self, approximation: str = "quadrature"):
        self.approximation = _check_approximation(approximation)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(approximation={self.approximation!r})"


class _BinaryLink(Link):
    """sigma: R -> (0, 1), explained through E[sigma^(r)(f)] and E[(sigma'^2)^(r)(f)]."""

    def derivatives(self, f: np.ndarray, order: int) -> list[np.ndarray]:
        """``[sigma(f), sigma'(f), ..., sigma^(order)(f)]`` (order <= 3), in stable forms."""
        raise NotImplementedError

    def response_expectations(self, mean, var) -> np.ndarray:
        """``E[sigma^(r)(f)]`` for r = 0, 1, 2, shape (3, ...)."""
        return self._expect(lambda f: np.stack(self.derivatives(f, 2)), mean, var,
                            f"{self.name} response", response_row=True)

    def slope_square_expectations(self, mean, var) -> np.ndarray:
        """``E[h(f)], E[h'(f)], E[h''(f)]`` for ``h = sigma'^2``, shape (3, ...)."""

        def moments(f):
            _, d1, d2, d3 = self.derivatives(f, 3)
            return np.stack([d1 * d1, 2.0 * d1 * d2, 2.0 * (d2 * d2 + d1 * d3)])

        return self._expect(moments, mean, var, f"{self.name} slope")

    def _expect(self, function, mean, var, what: str, response_row: bool = False):
        """``E[function(f)]`` elementwise (see ``gauss_hermite_expectations``); row 0 is
        ``sigma`` itself when ``response_row``."""
        return gauss_hermite_expectations(function, mean, var, what=what)

    def expected_response(self, mean, var) -> np.ndarray:
        """``E[sigma(f)]`` for f ~ N(mean, var), elementwise, shape of ``mean`` (e.g. (n,)).

        Taylor: ``sigma(m) + (var / 2) sigma''(m)``.

        Raises
        ------
        ValueError
            Shapes that differ, non-finite values or a negative variance.
        """
        mean, var = _as_moments(mean, var)
        if self.approximation == "taylor":
            value, _, second = self.derivatives(mean, 2)
            return value + 0.5 * var * second
        return self.response_expectations(mean, var)[0]

    def expected_gradient(self, mean, var, grad_mean, grad_cov) -> np.ndarray:
        """``E[d sigma(f(x)) / dx_k]`` (Seitz 2022, eq. 29, exact by Stein's lemma).

        Parameters
        ----------
        mean, var : array-like (n,)
            Latent posterior mean and variance of f(x).
        grad_mean : array-like (n, d)
            ``E[d f / dx_k]``.
        grad_cov : array-like (n, d)
            ``Cov(f(x), d f(x) / dx_k)``.

        Returns
        -------
        ndarray (n, d)
            ``grad_mean E[sigma'(f)] + grad_cov E[sigma''(f)]`` (quadrature), or the corrected
            eq. 33, ``sigma'(m) mu + (s2/2) sigma'''(m) mu + c sigma''(m)`` (taylor).

        Raises
        ------
        ValueError
            Shapes that do not match, non-finite values or a negative variance.
        """
        mean, var = _as_moments(mean, var)
        grad_mean, grad_cov = _check_gradient_moments(mean, grad_mean, grad_cov, mean.shape)
        if self.approximation == "taylor":
            _, first, second, third = self.derivatives(mean, 3)
            slope = first + 0.5 * var * third
            return slope[..., None] * grad_mean + second[..., None] * grad_cov
        _, slope, curvature = self.response_expectations(mean, var)
        return slope[..., None] * grad_mean + curvature[..., None] * grad_cov

    def gradient_covariance(self, mean, var, grad_mean, grad_cov, grad_grad_cov) -> np.ndarray:
        """Posterior covariance of ``d sigma(f(x)) / dx`` across features (beyond the paper).

        ``E[sigma'(f)^2 g g^T] - e e^T`` with ``h = sigma'^2`` and the module docstring's
        identity ``E[h] (G + mu mu^T) + (mu c^T + c mu^T) E[h'] + c c^T E[h'']``; exact (no
        Taylor form exists in the paper).

        Parameters
        ----------
        mean, var : (n,)
        grad_mean, grad_cov : (n, d)
        grad_grad_cov : (n, d, d)
            ``Cov(d f / dx_k, d f / dx_l)`` (the derivative process).

        Returns
        -------
        ndarray (n, d, d), symmetric.

        Raises
        ------
        ValueError
            ``approximation="taylor"`` (it approximates means only) or bad shapes.
        """
        if self.approximation == "taylor":
            raise ValueError(
                "the Taylor approximation gives expected gradients only; use "
                "approximation='quadrature' for their covariance."
            )
        mean, var = _as_moments(mean, var)
        mu, c = _check_gradient_moments(mean, grad_mean, grad_cov, mean.shape)
        G = np.asarray(grad_grad_cov, dtype=np.float64)
        if G.shape != mu.shape + mu.shape[-1:]:
            raise ValueError(
                f"grad_grad_cov must have shape {mu.shape + mu.shape[-1:]}, got {G.shape}."
            )
        h0, h1, h2 = self.slope_square_expectations(mean, var)
        expected = self.expected_gradient(mean, var, mu, c)
        outer = lambda a, b: a[..., :, None] * b[..., None, :]  # noqa: E731
        second = (
            h0[..., None, None] * (G + outer(mu, mu))
            + h1[..., None, None] * (outer(mu, c) + outer(c, mu))
            + h2[..., None, None] * outer(c, c)
        )
        cov = second - outer(expected, expected)
        return 0.5 * (cov + np.swapaxes(cov, -1, -2))


    def pair_expectations(self, mean_a, mean_b, var_a, var_b, cov_ab,
                          orders=PAIR_ORDERS) -> np.ndarray:
        """``E[sigma^(p)(a) sigma^(q)(b)]`` for jointly Gaussian (a, b), elementwise.

        The bivariate expectations behind the covariance of probability-level integrated
        gradients (``a = f(x_s)``, ``b = f(x_t)`` at two nodes of the path). By quadrature:
        ``(a, b) = m + L (z, z')`` with L the Cholesky factor of the 2 x 2 covariance pivoted
        on the larger variance (so a singular covariance, correlation +-1, needs no special
        case) and a tensor trapezoid rule in (z, z') against the N(0, 1) densities on
        [-8.5, 8.5]^2, nodes 17, 33, .. 1025 per axis until two successive rules agree to
        1e-12. Every sigma^(p) is analytic in the strip ``|Im f| < pi`` (logit) or entire
        (probit), so the rule converges geometrically once its latent step
        ``sqrt(var) 17 / (n - 1)`` is below about 0.5: wide latent variances (the logit's
        sharp case) need more nodes but no other rule; past variance ~400 a
        ``RuntimeWarning`` reports the remaining change.

        Each pair is refined on its own (only the wide ones reach fine rules).

        Parameters
        ----------
        mean_a, mean_b, var_a, var_b, cov_ab : array-like, all of one shape (...)
            Means, variances and covariance of (a, b); ``cov_ab^2 <= var_a var_b`` up to
            round-off (it is clipped to that).
        orders : sequence of (int, int), default ``PAIR_ORDERS``
            Derivative orders (p, q), each in 0..3.

        Returns
        -------
        ndarray (len(orders), ...)

        Raises
        ------
        ValueError
            Shapes that differ, non-finite values, a negative variance or an order outside 0..3.
        """
        mean_a, var_a = _as_moments(mean_a, var_a, "mean_a", "var_a")
        mean_b, var_b = _as_moments(mean_b, var_b, "mean_b", "var_b")
        cov_ab = np.asarray(cov_ab, dtype=np.float64)
        if not (mean_a.shape == mean_b.shape == cov_ab.shape):
            raise ValueError(
                f"mean_a {mean_a.shape}, mean_b {mean_b.shape} and cov_ab {cov_ab.shape} must "
                "have the same shape."
            )
        if not np.all(np.isfinite(cov_ab)):
            raise ValueError("cov_ab must be finite.")
        orders = [tuple(int(o) for o in order) for order in orders]
        if any(not 0 <= o <= 3 for order in orders for o in order):
            raise ValueError(f"orders must be pairs of derivative orders in 0..3, got {orders}.")
        return self._pair_quadrature(orders, mean_a, mean_b, var_a, var_b, cov_ab)

    def _pair_quadrature(self, orders, mean_a, mean_b, var_a, var_b, cov_ab):
        shape = mean_a.shape
        mean_a, mean_b, var_a, var_b, cov_ab = (
            np.ravel(v) for v in (mean_a, mean_b, var_a, var_b, cov_ab))
        # Pivot on the larger variance: u = m_u + scale z drives it, v = m_v + slope z +
        # rest z' is the other, with conditional variance rest^2 = var_small - cov^2 /
        # var_large >= 0. A swapped pair computes E[sigma^(q)(u) sigma^(p)(v)] for (p, q).
        swap = var_b > var_a
        mean_u, mean_v = np.where(swap, mean_b, mean_a), np.where(swap, mean_a, mean_b)
        large, small = np.where(swap, var_b, var_a), np.where(swap, var_a, var_b)
        scale = np.sqrt(large)
        slope = np.divide(cov_ab, scale, out=np.zeros_like(cov_ab), where=scale > 0)
        slope = np.clip(slope, -np.sqrt(small), np.sqrt(small))
        rest = np.sqrt(np.maximum(small - slope**2, 0.0))
        needed = max(max(order) for order in orders)
        out = np.empty((len(orders), len(mean_a)))
        previous, pending = None, np.arange(len(mean_a))
        # Each pair is refined on its own: the wide ones need fine rules, most do not.
        for n_nodes in _PAIR_NODES:
            z = np.linspace(-_PAIR_HALF_WIDTH, _PAIR_HALF_WIDTH, n_nodes)
            weights = np.exp(-0.5 * z * z) / _SQRT_2PI * (z[1] - z[0])
            weights[[0, -1]] *= 0.5
            current = np.empty((len(orders), len(pending)))
            batch = max(1, _PAIR_BATCH // (n_nodes * n_nodes))
            for begin in range(0, len(pending), batch):
                rows = pending[begin:begin + batch]
                outer = self.derivatives(mean_u[rows, None] + scale[rows, None] * z, needed)
                inner = self.derivatives(
                    mean_v[rows, None, None]
                    + slope[rows, None, None] * z[None, :, None]
                    + rest[rows, None, None] * z[None, None, :], needed)
                # psi_q(z_i) = sum_j w_j sigma^(q)(v_ij), then sum_i w_i sigma^(p)(u_i) psi_q
                inner = [values @ weights for values in inner]
                flipped = swap[rows]
                for row, (p, q) in enumerate(orders):
                    straight = (outer[p] * inner[q]) @ weights
                    reverse = (outer[q] * inner[p]) @ weights
                    current[row, begin:begin + len(rows)] = np.where(flipped, reverse, straight)
            out[:, pending] = current
            if previous is not None:
                gap = np.max(np.abs(current - previous), axis=0)
                keep = gap > _TOLERANCE
                pending, current = pending[keep], current[:, keep]
                if not pending.size:
                    break
            previous = current
        else:
            warnings.warn(
                f"bivariate {self.name} expectations did not converge to {_TOLERANCE:g} with "
                f"{n_nodes}^2 trapezoid nodes at {pending.size} pairs (change between the last "
                f"two rules up to {float(gap.max()):.3g}); a latent variance of "
                f"{float(np.max(large[pending])):.3g} is very wide for the link.",
                RuntimeWarning, stacklevel=3,
            )
        return out.reshape((len(orders),) + shape)


class Logit(_BinaryLink):
    """Logistic link ``sigma(f) = 1 / (1 + exp(-f))``; expectations by Gauss-Hermite (latent
    variance <= 1) or a trapezoid rule in the latent value (wider; see ``_expect``).

    The derivatives are polynomials in sigma (docs/errata.md corrects eq. 34, which writes
    derivatives where powers belong): ``sigma' = sigma (1 - sigma)``,
    ``sigma'' = sigma' (1 - 2 sigma)``, ``sigma''' = sigma' (1 - 6 sigma')``, evaluated from
    ``e = exp(-|f|)`` as ``e / (1 + e)^2`` and ``-sign(f) (1 - e) / (1 + e)`` (that is,
    ``-tanh(f / 2)``) so that no digits cancel in the tails.
    """

    name = "logit"

    def _expect(self, function, mean, var, what, response_row=False):
        """Gauss-Hermite for latent variances up to 1; above, the trapezoid rule in the latent
        value u over [-40, 40] of ``function(u) N(u; m, s2)``, whose rows (derivatives of
        sigma, all decaying like exp(-|u|)) are analytic in the strip |Im u| < pi, so the rule
        converges geometrically as its step halves (0.5 .. 0.0625, until two steps agree to
        1e-12). The response itself does not decay; its row uses
        ``E[sigma(f)] = int sigma'(u) Phi((m - u) / s) du`` (sigma is the CDF of the logistic
        distribution, so this is P(L < f) for an independent logistic L)."""
        shape = np.shape(mean)
        mean, var = np.ravel(mean), np.ravel(var)
        wide = var > _WIDE_VARIANCE
        parts = {}
        if np.any(~wide):
            parts[False] = gauss_hermite_expectations(function, mean[~wide], var[~wide],
                                                      what=what)
        if np.any(wide):
            m, s = mean[wide][:, None], np.sqrt(var[wide])[:, None]

            def rule(step):
                u = np.arange(-_HALF_WIDTH, _HALF_WIDTH + 0.5 * step, step)
                u = np.broadcast_to(u, (len(m), len(u)))
                density = np.exp(-0.5 * ((u - m) / s) ** 2) / (s * _SQRT_2PI)
                values = function(u) * density
                if response_row:
                    values[0] = expit(u) * expit(-u) * ndtr((m - u) / s)
                return values.sum(-1) * step

            parts[True] = _refine(_TRAPEZOID_STEPS, rule, _TOLERANCE, lambda n, gap: (
                f"trapezoid {what} did not converge to {_TOLERANCE:g} at step {n} (last "
                f"change {gap:.3g})."
            ))
        first = next(iter(parts.values()))
        out = np.empty((first.shape[0], len(mean)))
        for is_wide, values in parts.items():
            out[:, wide == is_wide] = values
        return out.reshape((first.shape[0],) + shape)

    def derivatives(self, f, order):
        # One exponential, e = exp(-|f|) <= 1: sigma = 1 / (1 + e) (f >= 0) or e / (1 + e),
        # sigma' = e / (1 + e)^2 and -tanh(f / 2) = -sign(f) (1 - e) / (1 + e), no digits
        # cancelling in either tail (the 2-D path quadrature evaluates millions of these).
        e = np.exp(-np.abs(f))
        inverse = 1.0 / (1.0 + e)
        values = [np.where(f >= 0, inverse, e * inverse)]
        if order >= 1:
            slope = e * inverse * inverse
            values.append(slope)
        if order >= 2:
            values.append(slope * -np.sign(f) * (1.0 - e) * inverse)
        if order >= 3:
            values.append(slope * (1.0 - 6.0 * slope))
        return values


class Probit(_BinaryLink):
    """Probit link ``Phi(f)`` (standard normal CDF); every expectation in closed form.

    With ``t = 1 + s2``, ``z = m / sqrt(t)``: ``E[Phi(f)] = Phi(z)`` and, differentiating in m,
    ``E[Phi'(f)] = phi(z) / sqrt(t)``, ``E[Phi''(f)] = -z phi(z) / t``. For ``h = phi^2``,
    ``E[h(f)] = exp(-m^2 / u) / (2 pi sqrt(u))`` with ``u = 1 + 2 s2``, and
    ``E[h'] = -2 m / u E[h]``, ``E[h''] = (4 m^2 / u^2 - 2 / u) E[h]``.
    """

    name = "probit"

    def derivatives(self, f, order):
        density = np.exp(-0.5 * f * f) / _SQRT_2PI
        return [ndtr(f), density, -f * density, (f * f - 1.0) * density][: order + 1]

    def response_expectations(self, mean, var):
        t = 1.0 + var
        z = mean / np.sqrt(t)
        density = np.exp(-0.5 * z * z) / _SQRT_2PI
        return np.stack([ndtr(z), density / np.sqrt(t), -z * density / t])

    def _pair_quadrature(self, orders, mean_a, mean_b, var_a, var_b, cov_ab):
        """Closed form for p, q >= 1: ``Phi^(p)(a) Phi^(q)(b) = phi(a) phi(b) He_{p-1}(a)
        He_{q-1}(b)`` up to sign, and a Gaussian times the bivariate N(m, S) is
        ``N(m; 0, I + S)`` times N(m', S') with ``m' = (I + S)^{-1} m``,
        ``S' = S (I + S)^{-1} = I - (I + S)^{-1}`` (no inverse of S: singular S is fine); the
        polynomial's expectation under N(m', S') is then exact. Orders with a 0 (the
        response itself) go to the quadrature of the base class."""
        if any(0 in order for order in orders):
            return super()._pair_quadrature(orders, mean_a, mean_b, var_a, var_b, cov_ab)
        det = (1.0 + var_a) * (1.0 + var_b) - cov_ab**2
        inv_aa, inv_bb, inv_ab = (1.0 + var_b) / det, (1.0 + var_a) / det, -cov_ab / det
        density = np.exp(-0.5 * (inv_aa * mean_a**2 + 2.0 * inv_ab * mean_a * mean_b
                                 + inv_bb * mean_b**2)) / (2.0 * np.pi * np.sqrt(det))
        m_a = inv_aa * mean_a + inv_ab * mean_b
        m_b = inv_ab * mean_a + inv_bb * mean_b
        s_aa, s_bb, s_ab = 1.0 - inv_aa, 1.0 - inv_bb, -inv_ab
        # E[P_p(a) P_q(b)] under N(m', S') for P_1 = 1, P_2 = -x, P_3 = x^2 - 1
        moments = {
            (1, 1): np.ones_like(m_a), (2, 1): -m_a, (1, 2): -m_b,
            (3, 1): m_a**2 + s_aa - 1.0, (1, 3): m_b**2 + s_bb - 1.0,
            (2, 2): m_a * m_b + s_ab,
        }
        missing = [order for order in orders if order not in moments]
        if missing:
            return super()._pair_quadrature(orders, mean_a, mean_b, var_a, var_b, cov_ab)
        return np.stack([density * moments[order] for order in orders])

    def slope_square_expectations(self, mean, var):
        u = 1.0 + 2.0 * var
        h0 = np.exp(-mean * mean / u) / (2.0 * np.pi * np.sqrt(u))
        return np.stack([h0, -2.0 * mean / u * h0, (4.0 * mean**2 / u**2 - 2.0 / u) * h0])


class Softmax(Link):
    """Softmax over C independent latent GPs, ``S_c(f) = exp(f_c) / sum_j exp(f_j)``.

    Parameters
    ----------
    approximation : {"quadrature", "taylor"}, default "quadrature"
        ``"taylor"``: Seitz (2022) eq. 37, the Hessian diagonal of eq. 36 at the latent means
        by automatic differentiation (torch).
    max_tensor_classes : int, default 3
        Up to this many classes, a deterministic product rule over the C - 1 latent
        differences (trapezoid, step halved until the rule with twice the step agrees to
        1e-6, which leaves an error near 1e-12; a ``RuntimeWarning`` with the measured gap
        where the node budget of 2^18 per point is not enough); above it, randomised
        quasi-Monte Carlo.
    n_qmc : int, default 4096
        Scrambled Sobol points per replicate (a power of 2).
    n_replicates : int, default 8
        Independent scramblings; the spread of their means gives the standard error.
    seed : int, default 0
        Seed of the scramblings (results are reproducible).

    Attributes
    ----------
    standard_error_ : float
        After a call by randomised QMC: the largest standard error of the Gaussian
        expectations behind the returned values (E[S_c], E[d_j S_c], E[d_j^2 S_c] and, for
        the covariance, E[s_j s_l] and its derivatives); 0.0 for the product rule and Taylor,
        which are deterministic.
    """

    name = "softmax"

    def __init__(self, approximation: str = "quadrature", max_tensor_classes: int = 3,
                 n_qmc: int = 4096, n_replicates: int = 8, seed: int = 0):
        super().__init__(approximation)
        for label, value, low in (("max_tensor_classes", max_tensor_classes, 1),
                                  ("n_qmc", n_qmc, 2), ("n_replicates", n_replicates, 2)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
                raise ValueError(f"{label} must be an integer >= {low}, got {value!r}.")
        if n_qmc & (n_qmc - 1):
            raise ValueError(f"n_qmc must be a power of 2 (Sobol balance), got {n_qmc}.")
        self.max_tensor_classes = int(max_tensor_classes)
        self.n_qmc, self.n_replicates, self.seed = int(n_qmc), int(n_replicates), seed
        self.standard_error_ = 0.0

    # -- the C-dimensional expectation ------------------------------------------------------
    def _expect(self, function, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
        """``E[function(f)]`` over independent f_j ~ N(mean_j, var_j); function maps
        (n, N, C) latent samples to (n, K, N) values and must be invariant to adding a
        constant to every f_j (true of S and all its derivatives); returns (n, K)."""
        C = mean.shape[1]
        if C <= self.max_tensor_classes:
            self.standard_error_ = 0.0
            return _difference_rule(function, mean, var)
        return self._quasi_monte_carlo(function, mean, var)

    def scrambled_normals(self, dimension: int):
        """Standard normal draws, one (n_qmc, dimension) array per replicate: independent
        scramblings (``seed``) of one Sobol' sequence, mapped through the normal quantile."""
        rng = np.random.default_rng(self.seed)
        for _ in range(self.n_replicates):
            uniform = qmc.Sobol(dimension, scramble=True, seed=rng).random(self.n_qmc)
            # a scrambled point can be exactly 0: clip so the quantile stays finite
            yield ndtri(np.clip(uniform, 1e-300, 1.0 - 1e-16))

    def _quasi_monte_carlo(self, function, mean, var):
        C = mean.shape[1]
        replicates = []
        for normal in self.scrambled_normals(C):
            batch = max(1, _MAX_TENSOR_SIZE // (self.n_qmc * C))
            replicates.append(np.concatenate([
                function(mean[i:i + batch, None, :]
                         + np.sqrt(var[i:i + batch, None, :]) * normal[None]).mean(-1)
                for i in range(0, len(mean), batch)
            ]))
        replicates = np.stack(replicates)
        self.standard_error_ = float(
            np.max(replicates.std(0, ddof=1), initial=0.0) / np.sqrt(self.n_replicates)
        )
        return replicates.mean(0)

    # -- public contract --------------------------------------------------------------------
    def _check(self, mean, var, target_class=None):
        mean, var = _as_moments(mean, var)
        if mean.ndim != 2 or mean.shape[1] < 2:
            raise ValueError(
                f"softmax mean and var must have shape (n, C) with C >= 2 classes, got "
                f"{mean.shape}."
            )
        if target_class is not None and (
            isinstance(target_class, bool) or not isinstance(target_class, int | np.integer)
            or not 0 <= target_class < mean.shape[1]
        ):
            raise ValueError(
                f"target_class must be a class index in 0..{mean.shape[1] - 1}, got "
                f"{target_class!r}."
            )
        return mean, var

    def expected_response(self, mean, var) -> np.ndarray:
        """``E[S(f)]`` for independent f_j ~ N(mean_j, var_j), shape (n, C).

        Parameters
        ----------
        mean, var : array-like (n, C)

        Raises
        ------
        ValueError
            Bad shapes (C < 2), non-finite values or negative variances.
        """
        mean, var = self._check(mean, var)
        if self.approximation == "taylor":
            _, second, _ = _softmax_derivatives_torch(mean)
            return np.exp(log_softmax(mean, axis=1)) + 0.5 * np.einsum(
                "pcii,pi->pc", second, var
            )
        return self._expect(lambda f: np.swapaxes(np.exp(log_softmax(f, axis=-1)), 1, 2),
                            mean, var)

    def expected_gradient(self, mean, var, grad_mean, grad_cov, target_class: int) -> np.ndarray:
        """``E[d S_c(f(x)) / dx_k]`` of class ``target_class`` (Seitz 2022, eq. 30).

        Parameters
        ----------
        mean, var : array-like (n, C)
        grad_mean : array-like (n, C, d)
            ``E[d f_j / dx_k]``.
        grad_cov : array-like (n, C, d)
            ``Cov(f_j(x), d f_j(x) / dx_k)``.
        target_class : int
            Index c of the class in 0..C-1.

        Returns
        -------
        ndarray (n, d)
            ``sum_j grad_mean_j E[d_j S_c] + grad_cov_j E[d_j^2 S_c]`` (quadrature or RQMC,
            see ``standard_error_``), or eq. 37 (taylor).

        Raises
        ------
        ValueError
            Bad shapes, values, or ``target_class``.
        """
        mean, var = self._check(mean, var, target_class)
        mu, c = _check_gradient_moments(mean, grad_mean, grad_cov, mean.shape)
        if self.approximation == "taylor":
            return _softmax_taylor_gradient(mean, var, mu, c, int(target_class))
        first, second = self.slope_expectations(mean, var, int(target_class))
        return self.chain(first, second, mu, c)

    @staticmethod
    def chain(first, second, grad_mean, grad_cov) -> np.ndarray:
        """Stein's lemma per latent: ``sum_j grad_mean_j E[d_j S_c] + grad_cov_j E[d_j^2 S_c]``
        from the slope expectations (n, C) and gradient moments (n, C, d); returns (n, d)."""
        return (np.einsum("pj,pjk->pk", first, grad_mean)
                + np.einsum("pj,pjk->pk", second, grad_cov))

    def slope_expectations(self, mean, var, target_class: int):
        """``E[d_j S_c(f)]`` and ``E[d_j^2 S_c(f)]``, each (n, C)."""
        return self.class_expectations(mean, var, target_class)[1:]

    def class_expectations(self, mean, var, target_class: int):
        """``E[S_c(f)]`` (n,), ``E[d_j S_c(f)]`` and ``E[d_j^2 S_c(f)]`` (n, C), in one pass
        over the nodes (what a probability-level explanation needs at each point)."""
        C = mean.shape[1]
        values = self._expect(lambda f: _class_integrands(f, target_class, False), mean, var)
        return values[:, 0], values[:, 1:C + 1], values[:, C + 1:]

    def gradient_moments(self, mean, var, grad_mean, grad_cov, grad_grad_cov,
                         target_class: int):
        """``E[S_c]`` (n,), ``E[d S_c / dx]`` (n, d) and ``Cov[d S_c / dx]`` (n, d, d) from one
        pass over the nodes (see ``gradient_covariance``)."""
        mean, var = self._check(mean, var, target_class)
        mu, c = _check_gradient_moments(mean, grad_mean, grad_cov, mean.shape)
        G = np.asarray(grad_grad_cov, dtype=np.float64)
        if G.shape != mu.shape + mu.shape[-1:]:
            raise ValueError(
                f"grad_grad_cov must have shape {mu.shape + mu.shape[-1:]}, got {G.shape}."
            )
        if not np.all(np.isfinite(G)):
            raise ValueError("grad_grad_cov must be finite.")
        if self.approximation == "taylor":
            raise ValueError(
                "the Taylor approximation gives expected gradients only; use "
                "approximation='quadrature' for their covariance."
            )
        C = mean.shape[1]
        values = self._expect(lambda f: _class_integrands(f, int(target_class), True),
                              mean, var)
        probability, first, second = values[:, 0], values[:, 1:C + 1], values[:, C + 1:2 * C + 1]
        h0, h1, h2 = (values[:, 2 * C + 1 + i * C * C:2 * C + 1 + (i + 1) * C * C]
                      .reshape(-1, C, C) for i in range(3))
        gradient = self.chain(first, second, mu, c)
        cross = np.einsum("pja,pjk,pkb->pab", mu, h1, c)
        moment = (np.einsum("pja,pjk,pkb->pab", mu, h0, mu) + cross
                  + np.swapaxes(cross, 1, 2) + np.einsum("pja,pjk,pkb->pab", c, h2, c)
                  + np.einsum("pjj,pjab->pab", h0, G))
        cov = moment - gradient[:, :, None] * gradient[:, None, :]
        return probability, gradient, 0.5 * (cov + np.swapaxes(cov, 1, 2))

    def gradient_covariance(self, mean, var, grad_mean, grad_cov, grad_grad_cov,
                            target_class: int) -> np.ndarray:
        """Posterior covariance of ``d S_c(f(x)) / dx`` across features (beyond the paper).

        With ``s_j = d_j S_c``, ``d S_c / dx = sum_j s_j(f) g_j`` where g_j = grad f_j is
        jointly Gaussian with f_j and independent of the other classes. Conditioning every g_j
        on f and applying Stein's lemma ``E[h(f) (f_j - m_j)] = s2_j E[d_j h]`` per latent
        (the ``c_j c_j^T / s2_j`` of the conditional covariance cancels against the
        ``(f_j - m_j)^2`` moment, so nothing divides by a variance), with
        ``h_jl = s_j s_l``::

            E[grad S_c grad S_c^T] = sum_jl [ mu_j mu_l^T E[h_jl] + mu_j c_l^T E[d_l h_jl]
                                            + c_j mu_l^T E[d_j h_jl] + c_j c_l^T E[d_j d_l h_jl] ]
                                     + sum_j G_j E[s_j^2],

        minus the outer product of ``expected_gradient``. For C = 1 this is the binary
        links' ``E[h] (G + mu mu^T) + (mu c^T + c mu^T) E[h'] + c c^T E[h'']``. The derivatives
        of ``h_jl`` need those of S_c up to the third order, in closed form in S (see
        ``_class_integrands``); the expectations by the same rule as the means (product
        trapezoid over class differences, or randomised QMC, ``standard_error_`` covering
        these expectations too).

        Parameters
        ----------
        mean, var : array-like (n, C)
        grad_mean : array-like (n, C, d)
            ``mu_j = E[d f_j / dx]``.
        grad_cov : array-like (n, C, d)
            ``c_j = Cov(f_j(x), d f_j(x) / dx)``.
        grad_grad_cov : array-like (n, C, d, d)
            ``G_j = Cov(d f_j / dx)`` (the derivative process of class j).
        target_class : int

        Returns
        -------
        ndarray (n, d, d), symmetric positive semi-definite up to rounding.

        Raises
        ------
        ValueError
            ``approximation="taylor"`` (it approximates means only), bad shapes or values, or
            a bad ``target_class``.
        """
        return self.gradient_moments(mean, var, grad_mean, grad_cov, grad_grad_cov,
                                     target_class)[2]


def _class_integrands(f: np.ndarray, target: int, second_moments: bool) -> np.ndarray:
    """Rows ``S_c``, ``s_j = d_j S_c``, ``d_j^2 S_c`` (and, if ``second_moments``, the C x C
    blocks ``s_j s_l``, ``d_l (s_j s_l)``, ``d_j d_l (s_j s_l)``) at latents f (n, N, C);
    returns (n, rows, N). The derivatives of S_c are those of ``softmax_class_derivatives``.
    """
    C = f.shape[-1]
    S, e, Sc = _softmax_and_excess(f, target)
    s = Sc * e
    rows = [Sc[None], s, Sc * (e * e - S * (1.0 - S))]
    if second_moments:
        T2, U = _second_and_third(S, e, Sc)
        diagonal = np.arange(C)
        T2_diagonal = T2[diagonal, diagonal]
        us = U * s[None]
        blocks = [
            s[:, None] * s[None],
            T2 * s[None] + s[:, None] * T2_diagonal[None],
            us + np.swapaxes(us, 0, 1) + T2 * T2 + T2_diagonal[:, None] * T2_diagonal[None],
        ]
        rows += [block.reshape((C * C,) + block.shape[2:]) for block in blocks]
    return np.moveaxis(np.concatenate(rows), 0, 1)


def _softmax_and_excess(f: np.ndarray, target: int):
    """``S`` (C, ...), ``e = onehot_target - S`` (C, ...) and ``S_target`` (...) at latents f
    (..., C), classes moved to the leading axis (every operation then runs over contiguous
    slabs)."""
    C = f.shape[-1]
    S = np.moveaxis(np.exp(log_softmax(f, axis=-1)), -1, 0).copy()
    e = np.eye(C)[target].reshape((C,) + (1,) * (S.ndim - 1)) - S
    return S, e, S[target]


def _second_and_third(S, e, Sc):
    """``T2_jl = d_j d_l S_c`` and ``U_jl = d_j^2 d_l S_c``, each (C, C, ...)."""
    diagonal = np.arange(len(S))
    D = -S[:, None] * S[None]
    D[diagonal, diagonal] += S
    T2 = Sc * (e[:, None] * e[None] - D)
    U = Sc * ((e * e)[:, None] * e[None] - D[diagonal, diagonal][:, None] * e[None]
              - D * (2.0 * e + 1.0 - 2.0 * S)[:, None])
    return T2, U


def softmax_class_derivatives(f: np.ndarray, target: int):
    """Derivatives of ``S_c`` (c = ``target``) in the latents, at latents f (..., C).

    With ``e = onehot_c - S`` and ``D = diag(S) - S S^T`` (= dS/df):
    ``d_j S_c = S_c e_j``, ``d_j d_l S_c = S_c (e_j e_l - D_jl)`` and
    ``d_j^2 d_l S_c = S_c (e_j^2 e_l - D_jj e_l - D_jl (2 e_j + 1 - 2 S_j))``.

    Returns
    -------
    first : ndarray (C, ...)
        ``d_j S_c``.
    second : ndarray (C, C, ...)
        ``d_j d_l S_c`` (symmetric in j, l).
    third : ndarray (C, C, ...)
        ``d_j^2 d_l S_c``.
    """
    S, e, Sc = _softmax_and_excess(f, target)
    return (Sc * e, *_second_and_third(S, e, Sc))


# -- the product trapezoid over class differences (softmax, C <= max_tensor_classes) --------
# S and its derivatives depend on the latents only through their differences to one class,
# d = f[1:] - f[0] ~ N(m[1:] - m[0], diag(v[1:]) + v[0]), so a C-class expectation is a
# (C-1)-dimensional one. With d = mu_d + L x (L the Cholesky factor, x standard normal) the
# rule is a product trapezoid in x over [-8, 8]. The trapezoid converges geometrically for an
# integrand analytic in a strip, and the softmax is (its poles sit at Im(f_a - f_b) = +-pi),
# so the step in x moves every latent difference f_a - f_b by at most _VALUE_STEP, and is at
# most _GAUSS_STEP (the Gaussian alone errs by ~exp(-2 pi^2 / h^2)). Unlike Gauss-Hermite,
# whose nodes spread with the latent standard deviation, this resolves the softmax's
# unit-width transitions at any latent variance. Error estimate: the same sum over every other
# node (twice the step). The error decays like A exp(-a / h), so halving the step squares it:
# err(h) = K gap(2 h, h)^2 with K = 1 / A, measured 0.3..4 at latent variances 0.05..100
# against the independent reference of the tests (e.g. variances near 3: gap 8e-6, error
# 2e-10; variances 30..100: gap 1e-6, error 5e-14). A gap below _ACCEPTED_GAP therefore
# leaves an error below about 4e-12, well inside the 1e-10 target.
_VALUE_STEP = 1.0
_GAUSS_STEP = 0.5
_STANDARD_HALF_RANGE = 8.0  # P(|x| > 8) = 1.2e-15 per dimension
_ACCEPTED_GAP = 1e-6
_REFINEMENTS = 2  # halvings of the step after the first estimate before giving up
# Nodes per point at most (the old tensor Gauss-Hermite's 64^3): in two differences 255 per
# half axis, i.e. value step 1 up to difference standard deviations of 32 (latent variances
# near 500); wider points are warned about with their measured gap.
_MAX_GRID_NODES = 2**18


def _half_node_counts(needed: np.ndarray) -> np.ndarray:
    """Even node counts per half axis, rounded up to a ladder 16 * 2^(k/4) so that points
    group into few grids (at most 19% more nodes per axis than needed)."""
    base = _STANDARD_HALF_RANGE / _GAUSS_STEP
    rungs = np.ceil(4.0 * np.log2(np.clip(needed / base, 1.0, 2.0**40)) - 1e-9)
    return 2 * np.ceil(0.5 * base * 2.0 ** (rungs / 4.0)).astype(int)


def _difference_factor(mean: np.ndarray, var: np.ndarray):
    """Mean (n, C-1) and lower Cholesky factor (n, C-1, C-1) of d = f[1:] - f[0]; a column
    whose pivot is 0 (degenerate latents) is zero (its off-diagonal numerators are 0 for a PSD
    matrix, up to rounding)."""
    k = mean.shape[1] - 1
    cov = var[:, 1:, None] * np.eye(k) + var[:, :1, None]
    factor = np.zeros_like(cov)
    for i in range(k):
        pivot = np.maximum(cov[:, i, i] - np.sum(factor[:, i, :i] ** 2, -1), 0.0)
        root = np.sqrt(pivot)
        factor[:, i, i] = root
        below = cov[:, i + 1:, i] - np.einsum("prm,pm->pr", factor[:, i + 1:, :i],
                                              factor[:, i, :i])
        safe = np.where(root > 0.0, root, 1.0)[:, None]
        factor[:, i + 1:, i] = np.where(root[:, None] > 0.0, below / safe, 0.0)
    return mean[:, 1:] - mean[:, :1], factor


def _axis_rule(n_half: int):
    """Trapezoid nodes k h, |k| <= n_half (even), h = 8 / n_half, with normalised N(0, 1)
    weights for the step h and, on the even k only, for the step 2 h."""
    k = np.arange(-n_half, n_half + 1)
    x = k * (_STANDARD_HALF_RANGE / n_half)
    density = np.exp(-0.5 * x * x)
    coarse = np.where(k % 2 == 0, density, 0.0)
    return x, density / density.sum(), coarse / coarse.sum()


def _difference_grid(counts):
    """Product of the axis rules: nodes (N, k) and weights (N, 2) (step h, step 2 h)."""
    axes = [_axis_rule(int(n)) for n in counts]
    nodes = np.stack(np.meshgrid(*[a[0] for a in axes], indexing="ij"), -1)
    fine, coarse = np.ones(nodes.shape[:-1]), np.ones(nodes.shape[:-1])
    for axis, (_, w_fine, w_coarse) in enumerate(axes):
        shape = [1] * len(axes)
        shape[axis] = -1
        fine, coarse = fine * w_fine.reshape(shape), coarse * w_coarse.reshape(shape)
    return nodes.reshape(-1, len(axes)), np.stack([fine.ravel(), coarse.ravel()], 1)


def _integrate_grid(function, centre, factor, counts):
    """Sums (n, K, 2) of ``function`` with step h and 2 h, for points sharing a grid; memory
    bounded by _MAX_TENSOR_SIZE (the integrands' C x C blocks per node and point)."""
    nodes, weights = _difference_grid(counts)
    n, k = centre.shape
    per_node = 8 * (k + 1) ** 2
    batch = max(1, _MAX_TENSOR_SIZE // (len(nodes) * per_node))
    chunk = max(1, min(len(nodes), _MAX_TENSOR_SIZE // per_node))
    outputs = []
    for i in range(0, n, batch):
        total = 0.0
        for j in range(0, len(nodes), chunk):
            d = centre[i:i + batch, None, :] + np.einsum("prk,nk->pnr", factor[i:i + batch],
                                                          nodes[j:j + chunk])
            f = np.concatenate([np.zeros(d.shape[:-1] + (1,)), d], -1)
            total = total + function(f) @ weights[j:j + chunk]
        outputs.append(total)
    return np.concatenate(outputs)


def _difference_rule(function, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """``E[function(f)]`` (n, K) by the product trapezoid over class differences (see above).

    Each point's step is halved (at most ``_REFINEMENTS`` times, within ``_MAX_GRID_NODES``)
    until the sums with steps h and 2 h agree to ``_ACCEPTED_GAP`` (an error near 1e-12, see
    above); otherwise a ``RuntimeWarning`` states the remaining change."""
    if not len(mean):
        return function(np.zeros((0, 1, mean.shape[1])))[..., 0]
    centre, factor = _difference_factor(mean, var)
    padded = np.concatenate([np.zeros_like(factor[:, :1]), factor], 1)  # the f_0 = 0 row
    spread = padded.max(1) - padded.min(1)  # (n, k): largest change of any f_a - f_b per unit x
    step = np.minimum(_GAUSS_STEP, _VALUE_STEP / np.maximum(spread, 1e-300))
    counts = _half_node_counts(_STANDARD_HALF_RANGE / step)
    k = mean.shape[1] - 1
    cap = 2 * int((_MAX_GRID_NODES ** (1.0 / k) - 1.0) // 4)  # (2 n + 1)^k <= budget, n even
    counts = np.minimum(counts, cap)
    accept = _ACCEPTED_GAP
    result, gaps, pending = None, np.zeros(len(mean)), np.arange(len(mean))
    for level in range(_REFINEMENTS + 1):
        groups = {}
        for point in pending:
            groups.setdefault(tuple(counts[point]), []).append(point)
        for key, members in groups.items():
            members = np.asarray(members)
            sums = _integrate_grid(function, centre[members], factor[members], key)
            if result is None:
                result = np.empty((len(mean), sums.shape[1]))
            result[members] = sums[..., 0]
            gaps[members] = np.max(np.abs(sums[..., 0] - sums[..., 1]), axis=1)
        pending = pending[gaps[pending] > accept]
        if level == _REFINEMENTS or not len(pending):
            break
        doubled = np.minimum(2 * counts[pending], cap)
        grows = np.any(doubled > counts[pending], axis=1)
        counts[pending] = doubled
        pending = pending[grows]
    failed = gaps > accept
    if np.any(failed):
        warnings.warn(
            f"softmax product trapezoid over {k} class difference(s) is not converged for "
            f"{int(failed.sum())} point(s): the sum with twice the step differs by "
            f"{float(gaps.max()):.3g} (accepted: {accept:g}, an error near 1e-12; the error "
            f"is near the square of the gap); latent variances up to {float(var.max()):.3g}.",
            RuntimeWarning, stacklevel=4,
        )
    return result

def _softmax_derivatives_torch(mean: np.ndarray):
    """Jacobian, Hessian and third-derivative tensors of S at each row of ``mean`` by autograd:
    shapes (n, C, C), (n, C, C, C), (n, C, C, C, C) (output class first)."""
    import torch
    from torch.func import jacfwd, jacrev, vmap

    def softmax(f):
        return torch.softmax(f, dim=-1)

    first = jacrev(softmax)
    second = jacfwd(first)
    third = jacfwd(second)
    f = torch.as_tensor(mean, dtype=torch.float64)
    return tuple(vmap(fn)(f).numpy() for fn in (first, second, third))


def _softmax_taylor_gradient(mean, var, mu, c, target_class):
    """Eq. 37: kappa(m) + 1/2 sum_i H_ii(m) s2_i, where kappa (eq. 36) is
    ``sum_j d_j S_c(f) (mu_j + c_j / s2_j (f_j - m_j))``. Its second derivative in f_i at m is
    ``sum_j mu_j d_i^2 d_j S_c + 2 (c_i / s2_i) d_i^2 S_c``, so the s2_i cancel."""
    first, second, third = (t[:, target_class] for t in _softmax_derivatives_torch(mean))
    hessian_diagonal = np.einsum("pii->pi", second)
    kappa = np.einsum("pj,pjk->pk", first, mu)
    curvature = 0.5 * np.einsum("pi,pjk,pjii->pk", var, mu, third)
    return kappa + curvature + np.einsum("pi,pik->pk", hessian_diagonal, c)


def get_link(link) -> Link:
    """A ``Link`` from a name ("logit", "probit", "softmax") or a ``Link`` instance.

    Raises
    ------
    ValueError
        Unknown name.
    TypeError
        Neither a name nor a ``Link``.
    """
    if isinstance(link, Link):
        return link
    if isinstance(link, str):
        classes = {"logit": Logit, "probit": Probit, "softmax": Softmax}
        if link not in classes:
            raise ValueError(f"unknown link {link!r}; use one of {LINK_NAMES}.")
        return classes[link]()
    raise TypeError(
        f"link must be one of {LINK_NAMES} or a gx.links.Link, got {type(link).__name__}."
    )
