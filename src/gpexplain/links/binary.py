"""Binary links ``p = sigma(f)``: the expectations they share, by Stein's lemma.

For f ~ N(m, s2) with ``g = grad f`` jointly Gaussian (``E g = mu``, ``Cov(f, g_k) = c_k``,
``Cov(g) = G``), by Stein's lemma (no division by s2; Seitz 2022, eq. 29, with the
corrections of docs/errata.md)

    E[d p / dx_k]        = mu_k E[sigma'(f)] + c_k E[sigma''(f)],

and, beyond the paper, the full feature-by-feature second moment (condition g on f and use
Stein's lemma twice on ``h = sigma'^2``)

    E[sigma'(f)^2 g g^T] = E[h] (G + mu mu^T) + (mu c^T + c mu^T) E[h'] + c c^T E[h''].

Every expectation is one-dimensional; a family member supplies ``derivatives`` (sigma and its
derivatives in stable forms) and its own rule or closed forms: Gauss-Hermite with the node
count doubled until two successive rules agree to 1e-12 (``Logit``, latent variance <= 1;
above, a trapezoid rule in the latent value), closed forms (``Probit``). The bivariate
``E[sigma^(p)(a) sigma^(q)(b)]`` behind the covariance of probability-level integrated
gradients are ``pair_expectations``.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from gpexplain.links.base import (
    SQRT_2PI,
    TOLERANCE,
    BinaryReduction,
    Form,
    LatentMoments,
    Link,
    as_moments,
    check_gradient_covariance,
    check_gradient_moments,
    gauss_hermite_expectations,
)
from gpexplain.links.taylor import BinaryTaylor

__all__ = ["PAIR_ORDERS", "SECONDS_PER_PAIR_GRID_POINT", "BinaryLink", "BinaryQuadrature"]

# Bivariate expectations: a tensor trapezoid rule in the standardised coordinates of a pivoted
# Cholesky factor, on [-8.5, 8.5]^2 (the N(0, 1) mass outside is below 2e-17), with
# 2^j + 1 nodes per axis (j = 4 .. 10) until two successive rules agree to 1e-12.
_PAIR_HALF_WIDTH = 8.5
_PAIR_NODES = tuple(2**j + 1 for j in range(4, 11))
_PAIR_BATCH = 2**21  # float64 grid values per batch of pairs
# Largest latent step of the trapezoid rule at which it converges geometrically (docstring of
# ``BinaryLink.pair_expectations``).
_PAIR_CONVERGED_STEP = 0.5
#: Seconds per grid point of that rule (all orders of one pair), an estimate within about 2x:
#: 28-74 ns of wall time measured on a loaded core for the logit (40 pairs, latent variances 1
#: to 100), but 5e-8 priced the last rule of a two-point case at latent variance 46 at 36.6 s
#: where the whole call took 20 s of CPU; 2e-8 lets that case refine to completeness (2e-13).
SECONDS_PER_PAIR_GRID_POINT = 2e-8
#: The orders (p, q) of ``E[sigma^(p)(a) sigma^(q)(b)]`` that the covariance of
#: probability-level integrated gradients needs (second-order Stein on sigma'(a) sigma'(b)).
PAIR_ORDERS = ((1, 1), (2, 1), (1, 2), (3, 1), (2, 2), (1, 3))


class BinaryQuadrature(Form):
    """The exact expectations of a binary link (its ``response_expectations`` and
    ``slope_square_expectations``: closed forms or converged quadrature)."""

    def describe(self, n_latents: int) -> str:
        return self.link.rule

    def response(self, mean, var):
        return self.link.response_expectations(mean, var)[0]

    def gradient(self, mean, var, mu, c):
        _, slope, curvature = self.link.response_expectations(mean, var)
        return slope[..., None] * mu + curvature[..., None] * c

    def covariance(self, mean, var, mu, c, G):
        """``E[sigma'(f)^2 g g^T] - e e^T`` (the module docstring's identity), symmetric."""
        h0, h1, h2 = self.link.slope_square_expectations(mean, var)
        expected = self.gradient(mean, var, mu, c)
        outer = lambda a, b: a[..., :, None] * b[..., None, :]  # noqa: E731
        second = (
            h0[..., None, None] * (G + outer(mu, mu))
            + h1[..., None, None] * (outer(mu, c) + outer(c, mu))
            + h2[..., None, None] * outer(c, c)
        )
        cov = second - outer(expected, expected)
        return 0.5 * (cov + np.swapaxes(cov, -1, -2))


class BinaryLink(Link):
    """sigma: R -> (0, 1), explained through E[sigma^(r)(f)] and E[(sigma'^2)^(r)(f)]
    (abstract: ``Logit``, ``Probit``).

    Attributes
    ----------
    rule : str
        How its exact expectations are computed, for ``method`` strings.
    """

    forms = {"quadrature": BinaryQuadrature, "taylor": BinaryTaylor}
    rule = ""

    def derivatives(self, f: np.ndarray, order: int) -> list[np.ndarray]:
        """``[sigma(f), sigma'(f), ..., sigma^(order)(f)]`` (order <= 3), in stable forms."""
        raise NotImplementedError

    def log_response(self, f: torch.Tensor) -> torch.Tensor:
        """``log sigma(f)`` elementwise (torch, differentiable), stable in both tails: the
        Bernoulli log likelihood of the positive class (``gpexplain.likelihoods``)."""
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
        return self.form.response(*as_moments(mean, var))

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
        mean, var = as_moments(mean, var)
        grad_mean, grad_cov = check_gradient_moments(mean, grad_mean, grad_cov, mean.shape)
        return self.form.gradient(mean, var, grad_mean, grad_cov)

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
        mean, var = as_moments(mean, var)
        mu, c = check_gradient_moments(mean, grad_mean, grad_cov, mean.shape)
        return self.form.covariance(mean, var, mu, c, check_gradient_covariance(mu, grad_grad_cov))

    def check_latent_count(self, n_latents: int) -> None:
        if n_latents != 1:
            raise ValueError(
                f"link {self.name!r} does not fit {n_latents} latent posterior(s): softmax "
                "needs one per class (C >= 2), logit/probit exactly one."
            )

    def probability_and_gradient(self, latents: list[LatentMoments], target_class: int,
                                 full: bool):
        mean, var, grad_mean, grad_cov, grad_grad_cov = latents[0]
        probability = self.expected_response(mean, var)
        gradient = self.expected_gradient(mean, var, grad_mean, grad_cov)
        cov = (self.gradient_covariance(mean, var, grad_mean, grad_cov, grad_grad_cov)
               if full else None)
        if target_class == 0:  # p_0 = 1 - sigma(f): the gradient flips, its covariance not
            probability, gradient = 1.0 - probability, -gradient
        return probability, gradient, cov

    def binary_reduction(self, target_class: int, n_latents: int) -> BinaryReduction | None:
        """The one latent itself (the negative class's integrated gradients are minus the
        positive's, with the same covariance); None for the Taylor form."""
        if not self.gives_covariance:
            return None
        return BinaryReduction(self, ((1.0, 0),))

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
        mean_a, var_a = as_moments(mean_a, var_a, "mean_a", "var_a")
        mean_b, var_b = as_moments(mean_b, var_b, "mean_b", "var_b")
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

    def pair_expectation_seconds(self, var, orders=PAIR_ORDERS) -> np.ndarray:
        """Estimated seconds ``pair_expectations`` takes per pair whose larger variance is
        ``var`` (elementwise): the rules up to one past the first whose latent step
        ``sqrt(var) 17 / (n - 1)`` is below 0.5 (where it converges; the next one confirms),
        at ``SECONDS_PER_PAIR_GRID_POINT``; 0 where a closed form serves ``orders``."""
        var = np.asarray(var, dtype=np.float64)
        if self._closed_form(orders):
            return np.zeros_like(var)
        nodes = np.asarray(_PAIR_NODES)
        step = np.sqrt(var)[..., None] * (2.0 * _PAIR_HALF_WIDTH) / (nodes - 1)
        converged = np.argmax(step < _PAIR_CONVERGED_STEP, axis=-1)
        converged = np.where(np.any(step < _PAIR_CONVERGED_STEP, axis=-1), converged,
                             len(nodes) - 1)
        grid = np.cumsum(nodes.astype(np.float64) ** 2)
        return SECONDS_PER_PAIR_GRID_POINT * grid[np.minimum(converged + 1, len(nodes) - 1)]

    def _closed_form(self, orders) -> bool:
        """Whether ``pair_expectations`` has a closed form for every order in ``orders``."""
        return False

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
            weights = np.exp(-0.5 * z * z) / SQRT_2PI * (z[1] - z[0])
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
                keep = gap > TOLERANCE
                pending, current = pending[keep], current[:, keep]
                if not pending.size:
                    break
            previous = current
        else:
            warnings.warn(
                f"bivariate {self.name} expectations did not converge to {TOLERANCE:g} with "
                f"{n_nodes}^2 trapezoid nodes at {pending.size} pairs (change between the last "
                f"two rules up to {float(gap.max()):.3g}); a latent variance of "
                f"{float(np.max(large[pending])):.3g} is very wide for the link.",
                RuntimeWarning, stacklevel=3,
            )
        return out.reshape((len(orders),) + shape)
