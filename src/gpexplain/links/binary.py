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
gradients are ``pair_expectations``: Mehler's series in the correlation where it is at most
0.97, a tensor trapezoid rule above.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

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
#: Pairs correlated up to this (|rho|) take Mehler's series (up to 1024 terms); more strongly
#: correlated pairs the tensor trapezoid rule (where the two cost about the same: 1.4 ms a pair
#: at latent variance 19, measured on Guerry's pairs).
SERIES_CORRELATION = 0.97
#: Seconds per term, node and variable of the series' Hermite projections (one thread), an
#: upper bound: the 30,738 series pairs of Guerry's 16-node panelled rule, priced at 1.5 s,
#: took 0.3 s of CPU (their a's repeat, and are projected once). Its 1,951 tensor-rule pairs
#: were priced at 2.2 s and took 2.3 s.
SECONDS_PER_SERIES_VALUE = 1e-9
# Remainder bound of the series: |rho|^K ||f|| ||g|| with ||.|| the L2(N(0, 1)) norm, at most
# the supremum, which is at most 1 for every sigma^(p) used (p <= 3, logit and probit).
_SERIES_TOLERANCE = 1e-13
# The projections' trapezoid rule in z: Cramer's inequality |He_k(z)| exp(-z^2 / 4) <=
# 1.09 sqrt(k!) bounds |h_k(z) phi(z)| by 0.44 exp(-z^2 / 4) for every k, so [-12, 12] leaves
# out less than 1e-15; its step aliases frequencies past 2 pi / step, where the Fourier
# transform of sigma^(p)(m + s z) (sigma' : pi w / sinh(pi w)) is below 1e-15 past
# 11 s and that of h_k phi (w^k exp(-w^2 / 2)) past sqrt(k) + 6.
_SERIES_HALF_WIDTH = 12.0
_SERIES_BANDWIDTH = 11.0
_SERIES_MARGIN = 8.0


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
        gradients (``a = f(x_s)``, ``b = f(x_t)`` at two nodes of the path), by one of two
        rules chosen per pair by its correlation rho.

        **Mehler's series** (``|rho| <= SERIES_CORRELATION``, 0.97): with
        ``a = m_a + s_a X``, ``b = m_b + s_b Y`` and (X, Y) standard bivariate normal of
        correlation rho, Mehler's formula (the Hermite expansion of the bivariate normal
        density; Mehler, J. reine angew. Math. 66, 1866) gives exactly

            E[f(a) g(b)] = sum_k rho^k A_k B_k,  A_k = E[f(m_a + s_a Z) h_k(Z)],

        ``h_k = He_k / sqrt(k!)`` the orthonormal Hermite polynomials (B_k likewise for g and
        b). By Bessel's inequality the remainder after K terms is at most
        ``|rho|^K ||f|| ||g||`` (norms in L2(N(0, 1)), at most the suprema, <= 1 for every
        sigma^(p) here), so K = ``series_terms(rho)`` bounds it by 1e-13 (rounded up to a
        power of 2: 8 terms at rho = 0.02, 64 at 0.5, 1024 at 0.97). The projections are
        one-dimensional, computed once per distinct (mean, variance) by a trapezoid rule in z
        on [-12, 12] whose step resolves both sigma^(p)(m + s z) and h_k(z) phi(z)
        (``_hermite_table``); a pair then costs K products. Weakly correlated pairs, most of
        a path rule's, cost microseconds.

        **Tensor trapezoid rule** (stronger correlations): ``(a, b) = m + L (z, z')`` with L
        the Cholesky factor of the 2 x 2 covariance pivoted on the larger variance (so a
        singular covariance, correlation +-1, needs no special case), the trapezoid rule in
        z and z' against the N(0, 1) densities on [-8.5, 8.5]^2. Every sigma^(p) is analytic
        in the strip ``|Im f| < pi`` (logit) or entire (probit), so the rule converges
        geometrically once its latent step ``sqrt(var) 17 / (n - 1)`` is below about 0.5: it
        starts at the first such rule of 65, 129, .. 1025 nodes on the outer axis (the inner
        axis, of conditional standard deviation ``rest``, takes as many nodes as give it the
        same latent step, at least 65) and is accepted where it agrees with the rule on every
        other node of the same grid to 1e-12; otherwise the nodes double. Wide latent
        variances (the logit's sharp case) need more nodes but no other rule; past variance
        ~400 a ``RuntimeWarning`` reports the remaining change.

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

    def pair_expectation_seconds(self, var, orders=PAIR_ORDERS, correlation=None) -> np.ndarray:
        """Estimated seconds ``pair_expectations`` takes per pair whose larger variance is
        ``var`` (elementwise), an upper bound within a few times.

        Pairs correlated up to ``SERIES_CORRELATION``: their Hermite projections (the terms
        ``series_terms`` gives on the nodes ``z >= 0`` of their rule, for both variables, every
        order; the a's that a path rule repeats are counted each time) at
        ``SECONDS_PER_SERIES_VALUE``. More strongly correlated pairs: the tensor rule's grid at
        its first rule and the next one (where it converges; most pairs stop at the first),
        the inner axis at the conditional standard deviation ``sqrt(1 - rho^2)`` of the
        variable, at ``SECONDS_PER_PAIR_GRID_POINT``. ``correlation=None`` (not known yet):
        the dearer of the two rules at the switch, each at its dearest (the series' terms grow
        with the correlation, the tensor rule's inner nodes shrink). 0 where a closed form
        serves ``orders``.
        """
        if correlation is None:
            return np.maximum(
                self.pair_expectation_seconds(var, orders, SERIES_CORRELATION),
                self.pair_expectation_seconds(var, orders, np.nextafter(SERIES_CORRELATION, 1)))
        var = np.asarray(var, dtype=np.float64)
        var, correlation = np.broadcast_arrays(var, np.abs(np.asarray(correlation, float)))
        if self._closed_form(orders):
            return np.zeros(var.shape)
        scale = np.sqrt(var)
        used = len({o for order in orders for o in order})
        n_terms = series_terms(correlation)
        series = SECONDS_PER_SERIES_VALUE * 2 * used * _table_values(scale, n_terms)
        nodes = np.asarray(_PAIR_NODES)
        first = _first_rule(scale)
        rest = scale * np.sqrt(np.maximum(1.0 - correlation**2, 0.0))
        grid = np.zeros(var.shape)
        for level in (first, np.minimum(first + 1, len(nodes) - 1)):
            n_outer = nodes[level]
            grid += n_outer * (1 + _inner_nodes(rest, scale, n_outer))
        return np.where(correlation <= SERIES_CORRELATION, series,
                        SECONDS_PER_PAIR_GRID_POINT * grid)

    def _closed_form(self, orders) -> bool:
        """Whether ``pair_expectations`` has a closed form for every order in ``orders``."""
        return False

    def _pair_quadrature(self, orders, mean_a, mean_b, var_a, var_b, cov_ab):
        """Mehler's series for pairs correlated up to ``SERIES_CORRELATION``, the tensor
        trapezoid rule for the others (flat arrays in, (len(orders), n) out)."""
        shape = mean_a.shape
        mean_a, mean_b, var_a, var_b, cov_ab = (
            np.ravel(v) for v in (mean_a, mean_b, var_a, var_b, cov_ab))
        correlation = pair_correlation(var_a, var_b, cov_ab)
        series = np.abs(correlation) <= SERIES_CORRELATION
        out = np.empty((len(orders), len(mean_a)))
        # The series' cost grows with its terms: pairs are grouped by the power of 2 of
        # terms they need, so that weakly correlated pairs do not pay for strong ones.
        n_terms = series_terms(correlation)
        for group in np.unique(n_terms[series]):
            rows = series & (n_terms == group)
            out[:, rows] = self._pair_series(orders, mean_a[rows], mean_b[rows], var_a[rows],
                                             var_b[rows], correlation[rows], group)
        if not np.all(series):
            tensor = ~series
            out[:, tensor] = self._pair_tensor(orders, mean_a[tensor], mean_b[tensor],
                                               var_a[tensor], var_b[tensor], cov_ab[tensor])
        return out.reshape((len(orders),) + shape)

    def _pair_series(self, orders, mean_a, mean_b, var_a, var_b, correlation, n_terms):
        """Mehler's series ``sum_k rho^k A_pk B_qk`` to ``n_terms`` terms (the docstring of
        ``pair_expectations``), its Hermite projections by a trapezoid rule in z."""
        needed = max(max(order) for order in orders)
        used = sorted({o for order in orders for o in order})
        # The largest latent standard deviation, rounded up to a half power of 2: calls share
        # their tables (the recurrence costs more than the projections of one call), unless
        # a table is large (very wide latents: its nodes grow with the standard deviation).
        largest = float(2.0 ** (np.ceil(2.0 * np.log2(np.sqrt(max(var_a.max(), var_b.max(),
                                                                   1e-300)))) / 2.0))
        build = (_hermite_table if _table_values(largest, n_terms) <= _PAIR_BATCH
                 else _hermite_table.__wrapped__)
        z, weights, even, odd = build(largest, int(n_terms))
        centre = len(z) // 2
        out = np.empty((len(orders), len(mean_a)))
        batch = max(1, _PAIR_BATCH // (2 * (needed + 1) * max(n_terms, len(z))))
        for begin in range(0, len(mean_a), batch):
            rows = slice(begin, begin + batch)
            # Each (mean, variance) is projected once: the a's of a path rule repeat.
            moments = np.stack([np.concatenate([mean_a[rows], mean_b[rows]]),
                                np.concatenate([var_a[rows], var_b[rows]])])
            distinct, inverse = np.unique(moments, axis=1, return_inverse=True)
            values = self.derivatives(distinct[0][:, None]
                                      + np.sqrt(distinct[1])[:, None] * z, needed)
            projections = {}
            for order in used:
                # h_k(-z) = (-1)^k h_k(z): even terms see f(z) + f(-z), odd ones f(z) - f(-z),
                # on the nodes z >= 0 (half the work of the whole grid).
                right, left = values[order][:, centre:], values[order][:, centre::-1]
                projection = np.empty((len(right), n_terms))
                projection[:, 0::2] = ((right + left) * weights) @ even.T
                projection[:, 1::2] = ((right - left) * weights) @ odd.T
                projections[order] = projection
            first, second = np.split(inverse.ravel(), 2)
            powers = correlation[rows, None] ** np.arange(n_terms)
            for row, (p, q) in enumerate(orders):
                out[row, rows] = np.einsum("ik,ik,ik->i", projections[p][first], powers,
                                           projections[q][second])
        return out

    def _pair_tensor(self, orders, mean_a, mean_b, var_a, var_b, cov_ab):
        """The tensor trapezoid rule of ``pair_expectations`` (flat arrays)."""
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
        start = _first_rule(scale)
        accepted = np.zeros(len(mean_a), dtype=bool)
        change = np.zeros(len(mean_a))  # between the last rule and its half, for the warning
        for level, n_outer in enumerate(_PAIR_NODES):
            pending = np.flatnonzero(~accepted & (start <= level))
            # The inner axis (conditional standard deviation ``rest``) takes the outer
            # axis's latent step: strongly correlated pairs need few inner nodes.
            n_inner = _inner_nodes(rest[pending], scale[pending], n_outer)
            for count in np.unique(n_inner):
                rows = pending[n_inner == count]
                current = np.empty((2, len(orders), len(rows)))
                batch = max(1, _PAIR_BATCH // (n_outer * count))
                for begin in range(0, len(rows), batch):
                    block = rows[begin:begin + batch]
                    current[:, :, begin:begin + len(block)] = self._tensor_rules(
                        orders, needed, n_outer, count, mean_u[block], scale[block],
                        mean_v[block], slope[block], rest[block], swap[block])
                out[:, rows] = current[0]
                change[rows] = np.max(np.abs(current[0] - current[1]), axis=0)
                accepted[rows] = change[rows] <= TOLERANCE
        if not np.all(accepted):
            missed = ~accepted
            warnings.warn(
                f"bivariate {self.name} expectations did not converge to {TOLERANCE:g} with "
                f"{n_outer}^2 trapezoid nodes at {int(missed.sum())} pairs (change from the "
                f"rule on every other node up to {float(change[missed].max()):.3g}); a latent "
                f"variance of {float(np.max(large[missed])):.3g} is very wide for the link.",
                RuntimeWarning, stacklevel=4,
            )
        return out

    def _tensor_rules(self, orders, needed, n_outer, n_inner, mean_u, scale, mean_v, slope,
                      rest, swap):
        """The tensor trapezoid rule on ``n_outer`` x ``n_inner`` nodes and the rule on every
        other node of both axes (steps twice as long), from one grid: (2, len(orders), B)."""
        z = np.linspace(-_PAIR_HALF_WIDTH, _PAIR_HALF_WIDTH, n_outer)
        w = np.linspace(-_PAIR_HALF_WIDTH, _PAIR_HALF_WIDTH, n_inner)
        outer = self.derivatives(mean_u[:, None] + scale[:, None] * z, needed)
        inner = self.derivatives(mean_v[:, None, None] + slope[:, None, None] * z[None, :, None]
                                 + rest[:, None, None] * w[None, None, :], needed)
        out = np.empty((2, len(orders), len(mean_u)))
        for half, nodes in enumerate((slice(None), slice(None, None, 2))):
            outer_weights = _trapezoid_weights(z[nodes])
            inner_weights = _trapezoid_weights(w[nodes])
            # psi_q(z_i) = sum_j w_j sigma^(q)(v_ij), then sum_i w_i sigma^(p)(u_i) psi_q
            psi = [values[:, nodes, nodes] @ inner_weights for values in inner]
            ends = [values[:, nodes] for values in outer]
            for row, (p, q) in enumerate(orders):
                straight = (ends[p] * psi[q]) @ outer_weights
                reverse = (ends[q] * psi[p]) @ outer_weights
                out[half, row] = np.where(swap, reverse, straight)
        return out


def _first_rule(scale):
    """Index in ``_PAIR_NODES`` of the first rule the tensor quadrature tries at latent
    standard deviation ``scale``: the first whose latent step is below
    ``_PAIR_CONVERGED_STEP`` (coarser ones do not agree with their halves to 1e-12), and not
    before the rule of 65 nodes, whose half (33 nodes, a step of 0.53 in z) is the first to
    integrate the N(0, 1) density itself to 1e-12."""
    nodes = np.asarray(_PAIR_NODES)
    steps = np.asarray(scale, dtype=np.float64)[..., None] * (2.0 * _PAIR_HALF_WIDTH) / (nodes - 1)
    fine = steps <= _PAIR_CONVERGED_STEP
    first = np.where(np.any(fine, axis=-1), np.argmax(fine, axis=-1), len(nodes) - 1)
    return np.maximum(first, _PAIR_NODES.index(65))


def _inner_nodes(rest, scale, n_outer):
    """Inner node counts of the tensor rule: the first of ``_PAIR_NODES`` whose latent step
    ``rest 17 / (n - 1)`` is at most the outer one, ``scale 17 / (n_outer - 1)``, and at least
    65 (whose half integrates the N(0, 1) density to 1e-12)."""
    nodes = np.asarray(_PAIR_NODES)
    needed = (n_outer - 1) * np.divide(rest, scale, out=np.zeros_like(rest), where=scale > 0)
    index = np.searchsorted(nodes - 1, np.ceil(needed - 1e-9))
    return np.maximum(nodes[np.minimum(index, len(nodes) - 1)], 65)


def _trapezoid_weights(z):
    """Trapezoid weights of an expectation over N(0, 1) on the equispaced nodes z."""
    weights = np.exp(-0.5 * z * z) / SQRT_2PI * (z[1] - z[0])
    weights[[0, -1]] *= 0.5
    return weights


def pair_correlation(var_a, var_b, cov_ab) -> np.ndarray:
    """``cov_ab / sqrt(var_a var_b)`` clipped to [-1, 1]; 0 where a variance is 0 (the
    covariance is then 0 too)."""
    scale = np.sqrt(var_a * var_b)
    correlation = np.divide(cov_ab, scale, out=np.zeros_like(scale), where=scale > 0)
    return np.clip(correlation, -1.0, 1.0)


def series_terms(correlation) -> np.ndarray:
    """Terms of Mehler's series that bound its remainder ``|rho|^K`` by ``_SERIES_TOLERANCE``
    at each ``correlation`` (see ``BinaryLink.pair_expectations``), rounded up to a power of
    2 (at least 8), elementwise."""
    magnitude = np.abs(np.asarray(correlation, dtype=np.float64))
    with np.errstate(divide="ignore"):
        needed = np.log(_SERIES_TOLERANCE) / np.log(np.minimum(magnitude, 1.0 - 1e-16))
    return (2 ** np.ceil(np.log2(np.maximum(needed, 8.0)))).astype(int)


def _series_step(largest_scale, n_terms):
    """Step in z of the projections' trapezoid rule (the comment at ``_SERIES_BANDWIDTH``)."""
    return 2.0 * np.pi / (_SERIES_BANDWIDTH * largest_scale + np.sqrt(n_terms) + _SERIES_MARGIN)


def _table_values(largest_scale, n_terms):
    """Values in ``_hermite_table``'s Hermite polynomials: terms times nodes z >= 0."""
    return n_terms * (np.ceil(_SERIES_HALF_WIDTH / _series_step(largest_scale, n_terms)) + 1)


@lru_cache(maxsize=32)
def _hermite_table(largest_scale: float, n_terms: int):
    """The trapezoid rule of the Hermite projections for latent standard deviations up to
    ``largest_scale`` and ``n_terms`` terms: the nodes z (symmetric about 0), and on the nodes
    z >= 0 the weights ``step phi(z)`` (halved at 0, which both halves of the grid count) and
    the normalised Hermite polynomials ``h_k(z) = He_k(z) / sqrt(k!)`` of even and of odd k
    (each (n_terms / 2, nodes)), by their three-term recurrence (stable upwards)."""
    step = _series_step(largest_scale, n_terms)
    half = int(np.ceil(_SERIES_HALF_WIDTH / step))
    z = step * np.arange(-half, half + 1)
    right = z[half:]
    weights = step * np.exp(-0.5 * right * right) / SQRT_2PI
    weights[0] *= 0.5
    table = np.empty((n_terms, len(right)))
    table[0] = 1.0
    table[1] = right
    for k in range(1, n_terms - 1):
        table[k + 1] = (right * table[k] - np.sqrt(k) * table[k - 1]) / np.sqrt(k + 1)
    arrays = (z, weights, table[0::2].copy(), table[1::2].copy())
    for array in arrays:
        array.flags.writeable = False  # shared by the calls that hit the cache
    return arrays
