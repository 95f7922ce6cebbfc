"""The integrated-gradient functional, for one baseline or a baseline distribution.

Butler, Feng and Djuric, *Explainable Learning with Gaussian Processes* (2024), Theorem 1 and
Corollary 1: ``attr_i(x) = (x_i - xt_i) int_0^1 d_i f(xt + t (x - xt)) dt`` is a linear
functional of f. With several baselines ``xt_1 .. xt_B`` the expected attribution
``(1/B) sum_b attr(x; xt_b)`` is one too: its cross term is the average ``mean_b A_b`` and its
prior term ``(1/B^2) sum_{b,b'} P_{b,b'}``, the two-path terms ``P_{b,b'}`` (b != b') by
Gauss-Legendre quadrature for every kernel (``path_pair_prior``).

Schemes, chosen once per kernel when the functional is bound:

* ``ClosedFormPath``: ``gx.kernels.RBF`` (Sec. 4.1, corrected, docs/errata.md safe form) and
  ``gx.kernels.RandomFeatureKernel`` (Sec. 4.2); the math lives in the kernel classes;
* ``StationaryQuadrature``: GPyTorch kernels built from squared-exponential, Matern 3/2 and
  5/2 and rational-quadratic pieces (``gpexplain.kernels.stationary.radial_leaves``) with the
  Gauss-Legendre rule: graded cross term and single-integral prior term, exponentially
  convergent;
* ``PlainQuadrature``: any other kernel, or another rule: Seitz's construction with the rule's
  nodes and a staggered Gauss-Legendre prior term (``gpexplain.functionals.quadrature``).

Completeness: ``mean.sum(1) == prediction - mean_b f(xt_b)`` and ``cov.sum((1, 2)) ==
Var[f(x) - mean_b f(xt_b)]``.
"""

from __future__ import annotations

from abc import abstractmethod
from functools import cached_property
from numbers import Integral

import numpy as np

from gpexplain.functionals._autograd_blocks import (
    GRAPH_BUDGET_BYTES,
    SECONDS_PER_GRAPH_BYTE,
    graph_bytes,
)
from gpexplain.functionals.base import LinearFunctional, Scheme
from gpexplain.functionals.quadrature import (
    QUADRATURE_RULES,
    integrated_gradient_functionals,
    path_pair_prior,
    quadrature_rule,
    stationary_cross,
    stationary_prior,
    two_path_prior,
)
from gpexplain.functionals.terms import CoregionalTerms, term_scheme
from gpexplain.kernels.base import Kernel
from gpexplain.kernels.random_features import RandomFeatureKernel
from gpexplain.kernels.rbf import RBF
from gpexplain.kernels.stationary import radial_leaves

__all__ = [
    "MAX_N_STEPS",
    "MAX_PRIOR_EVALUATIONS",
    "MAX_QUADRATURE_SECONDS",
    "METHODS",
    "IntegratedGradient",
]

METHODS = ("auto", "closed-form", "quadrature")
#: Largest ``n_steps`` accepted: Gauss-Legendre is converged to round-off far below it, and
#: the low-order rules' O(n_steps^2) prior term would take hours per point above it.
MAX_N_STEPS = 4096
#: Largest number of kernel mixed-derivative evaluations (node pairs times features) the
#: prior term may cost per explained point: 23-24 s on one core at the 1.2 microseconds each
#: measured in benchmarks/quadrature_cost.py (3.6 under heavier load: about a minute);
#: above it the covariance is refused with the estimate rather than left running for
#: minutes per row.
MAX_PRIOR_EVALUATIONS = 20_000_000
#: Largest estimated time per explained point of the quadrature schemes' autograd
#: evaluations (``_Quadrature.estimated_seconds``) and of the bivariate link expectations of
#: probability-level covariances (``explain.linked.link_covariance``), the prior term's half
#: minute.
MAX_QUADRATURE_SECONDS = 30.0
# Seconds per saved byte of the mixed derivatives relative to gradients (their D backward
# passes): 2.4-3.5 measured at 10 features (random features, orthogonal additive).
_SECOND_ORDER_FACTOR = 3.0
# Seconds per kernel mixed derivative (node pair times feature) of a cheap kernel, where
# autograd's per-operation overhead dominates (the 1.2 microseconds of MAX_PRIOR_EVALUATIONS).
_MIXED_DERIVATIVE_SECONDS = 1.2e-6
_PROBE_ROWS = 24
# Adaptive plain Gauss-Legendre: completeness identities to this fraction of the kernel's
# scale (below COMPLETENESS_RTOL, so a refined point passes the driver's check), with at
# most this many times ``n_steps`` nodes.
_ADAPTIVE_RTOL = 1e-10
_ADAPTIVE_GROWTH = 8


class IntegratedGradient(LinearFunctional):
    """Integrated gradients along straight paths from each baseline, averaged over baselines.

    Parameters
    ----------
    baselines : ndarray (n_baselines, n_features)
        Resolved reference points (one row for a single baseline).
    method : {"auto", "closed-form", "quadrature"}, default "auto"
        ``auto``: the registered scheme of the kernel type (a closed form where one exists);
        ``closed-form``: that, or ValueError; ``quadrature``: always quadrature.
    rule : {"gauss-legendre", "trapezoid", "simpson", "right"}, default "gauss-legendre"
    n_steps : int, default 64
        At most ``MAX_N_STEPS``.

    Raises
    ------
    ValueError
        Unknown rule or method, or ``n_steps`` not an integer in [1, ``MAX_N_STEPS``].
    """

    name = "integrated gradients"

    def __init__(
        self,
        baselines: np.ndarray,
        method: str = "auto",
        rule: str = "gauss-legendre",
        n_steps: int = 64,
    ):
        if rule not in QUADRATURE_RULES:
            raise ValueError(
                f"unknown quadrature rule {rule!r}; choose one of {QUADRATURE_RULES}."
            )
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; choose one of {METHODS}.")
        if isinstance(n_steps, bool) or not isinstance(n_steps, Integral) or n_steps < 1:
            raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}.")
        if n_steps > MAX_N_STEPS:
            raise ValueError(
                f"n_steps must be at most {MAX_N_STEPS}, got {n_steps}: the default "
                "Gauss-Legendre rule is converged to round-off at 64 (graded rule) to a few "
                "hundred nodes; the prior term of the other rules costs O(n_steps^2) per point."
            )
        self.baselines, self.method, self.rule, self.n_steps = baselines, method, rule, n_steps
        self.baseline = baselines[0] if len(baselines) == 1 else baselines

    def bind(self, kernel, Z: np.ndarray) -> Scheme:
        if self.method == "quadrature":
            return quadrature_scheme(self, kernel, Z)
        scheme = super().bind(kernel, Z)
        if self.method == "closed-form" and not isinstance(scheme, ClosedFormPath):
            raise ValueError(
                f"no closed-form integrated gradients for {kernel!r}; use method='quadrature' "
                "(or 'auto', which picks it)."
            )
        return scheme

    def completeness_target(self, posterior, X: np.ndarray, return_var: bool):
        """``(mean_b f(xt_b), Var[f(x) - mean_b f(xt_b)])`` under the posterior."""
        baseline_prediction = float(np.mean(posterior.predict_mean(self.baselines)))
        if not return_var:
            return baseline_prediction, None
        return baseline_prediction, posterior.difference_variance(X, self.baselines)

    def describe(self, scheme: Scheme) -> str:
        label = super().describe(scheme)
        if len(self.baselines) > 1:
            label = label[:-1] + f"; expected over {len(self.baselines)} baselines)"
        return label


class PathScheme(Scheme):
    """Integrated gradients of one kernel along each baseline's path, averaged (abstract).

    Subclasses give the one-path terms (``path_cross``, ``path_prior``, optionally a cheaper
    ``path_cross_and_prior``) and how many (n_basis, n_features) slabs a path
    needs; the average over baselines and the two-path prior terms are done here.
    """

    #: (n_basis, n_features) slabs one path of one point needs.
    per_path_copies = 1

    @property
    def baselines(self) -> np.ndarray:
        return self.functional.baselines

    @abstractmethod
    def path_cross(self, X: np.ndarray, baseline: np.ndarray) -> np.ndarray:
        """``A[p, i, n]`` for one baseline, (n_points, n_features, n_basis)."""

    @abstractmethod
    def path_prior(self, X: np.ndarray, baseline: np.ndarray) -> np.ndarray:
        """``P[p, i, j]`` for one baseline, (n_points, n_features, n_features)."""

    def path_cross_and_prior(self, X, baseline):
        return self.path_cross(X, baseline), self.path_prior(X, baseline)

    @cached_property
    def torch_kernel(self):
        """The GPyTorch kernel for autograd (not built when the closed form suffices)."""
        return self.kernel.torch_kernel(self.Z.shape[1])

    @cached_property
    def pair_leaves(self):
        """Where the kernel's kinks are (for the two-path terms), whatever the scheme."""
        return radial_leaves(self.torch_kernel, self.Z.shape[1]) or []

    def cross(self, X):
        self._check_cost(with_prior=False)
        return sum(self.path_cross(X, xt) for xt in self.baselines) / len(self.baselines)

    def prior(self, X):
        return self._average(X, with_cross=False)[1]

    def cross_and_prior(self, X):
        return self._average(X, with_cross=True)

    def prior_evaluations(self) -> int:
        """Kernel mixed derivatives (node pairs times features) the prior term costs per point:
        one path's (``path_prior_pairs``) per baseline, plus ``2 n_steps^2`` per pair of
        baselines (``path_pair_prior``)."""
        n_baselines, n_steps = len(self.baselines), self.functional.n_steps
        pairs = n_baselines * self.path_prior_pairs() + n_baselines * (n_baselines - 1) * n_steps**2
        return pairs * self.Z.shape[1]

    def path_prior_pairs(self) -> int:
        """Node pairs of one path's prior term (0: a closed form)."""
        return 0

    def estimated_seconds(self, with_prior: bool) -> float:
        """Seconds per explained point the autograd evaluations are estimated to take (0: a
        closed form)."""
        return 0.0

    def _check_cost(self, with_prior: bool = True) -> None:
        cost = self.prior_evaluations()
        if with_prior and cost > MAX_PRIOR_EVALUATIONS:
            raise ValueError(
                f"the covariance of these integrated gradients would cost {cost:.3g} kernel "
                f"second derivatives per point (limit {MAX_PRIOR_EVALUATIONS:.3g}, half a "
                f"minute to a minute per point): {len(self.baselines)} baseline(s), rule "
                f"{self.functional.rule!r}, n_steps={self.functional.n_steps}, "
                f"{self.Z.shape[1]} features. Use fewer baselines or n_steps, "
                "rule='gauss-legendre', or return_cov=False (the mean costs far less)."
            )
        seconds = self.estimated_seconds(with_prior)
        if seconds > MAX_QUADRATURE_SECONDS:
            raise ValueError(
                f"integrated gradients by quadrature{'' if with_prior else ' (the mean alone)'}"
                f" would take about {seconds:.3g} s per point (limit {MAX_QUADRATURE_SECONDS:g} "
                f"s), estimated from the memory autograd needs for this kernel, measured on it: "
                f"{type(self.kernel).__name__}, {len(self.Z)} training points, n_steps="
                f"{self.functional.n_steps}, {len(self.baselines)} baseline(s). "
                f"{self._cheaper(with_prior)}"
            )

    def _average(self, X, with_cross: bool):
        self._check_cost()
        cross, prior = 0.0, 0.0
        for b, xt in enumerate(self.baselines):
            if with_cross:
                cross_b, prior_b = self.path_cross_and_prior(X, xt)
                cross = cross + cross_b
            else:
                prior_b = self.path_prior(X, xt)
            prior = prior + prior_b
            for other in self.baselines[b + 1 :]:
                pair = path_pair_prior(
                    self.torch_kernel, X, xt, other, self.functional.n_steps, self.pair_leaves
                )
                prior = prior + pair + np.swapaxes(pair, 1, 2)
        n_baselines = len(self.baselines)
        return (cross / n_baselines if with_cross else None), prior / n_baselines**2

    def copies_per_point(self) -> int:
        n_baselines, n_steps = len(self.baselines), self.functional.n_steps
        pairs = 2 * n_steps**2 * n_baselines * (n_baselines - 1) // max(len(self.Z), 1)
        return n_baselines * self.per_path_copies + pairs


@IntegratedGradient.register(RBF)
@IntegratedGradient.register(RandomFeatureKernel)
class ClosedFormPath(PathScheme):
    """The kernel's own ``integrated_gradient_cross`` / ``_prior``."""

    label = "closed form"

    def path_cross(self, X, baseline):
        return self.kernel.integrated_gradient_cross(X, baseline, self.Z)

    def path_prior(self, X, baseline):
        return self.kernel.integrated_gradient_prior(X, baseline)

    def prior_between(self, X1, X2):
        """``(1/B^2) sum_{b, b'} P(x_p; xt_b, x'_q; xt_b')`` from the kernel's two-path term
        (RBF: tensor Gauss-Legendre with ``n_steps`` nodes per path; random features: exact)."""
        baselines, n_steps = self.baselines, self.functional.n_steps
        total = 0.0
        for first in baselines:
            for second in baselines:
                total = total + self.kernel.integrated_gradient_prior_between(
                    X1, first, X2, second, n_steps
                )
        return total / len(baselines) ** 2


class _Quadrature(PathScheme):
    """Quadrature with autograd over the kernel's GPyTorch module."""

    def __init__(self, functional, kernel, Z, module, nodes, weights, leaves=None):
        super().__init__(functional, kernel, Z)
        self.torch_kernel, self.nodes, self.weights, self.leaves = module, nodes, weights, leaves
        self.per_path_copies = max(len(nodes), functional.n_steps)

    def estimated_seconds(self, with_prior: bool) -> float:
        """The pairs each term differentiates per point times the bytes autograd saves per
        pair (measured on this kernel, ``graph_bytes``), at ``SECONDS_PER_GRAPH_BYTE``; the
        mixed derivatives' D backward passes cost ``_SECOND_ORDER_FACTOR`` times more per
        byte. Before any adaptive refinement."""
        # Probe pairs: training points against shifted copies (distinct, in the data's range).
        probe = self.Z[np.arange(_PROBE_ROWS) % len(self.Z)]
        cross_pairs = len(self.baselines) * self.per_path_copies * len(self.Z)
        work = cross_pairs * graph_bytes(self.torch_kernel, probe, probe + 0.25, False)[1]
        if with_prior:
            prior_pairs = self.prior_evaluations() // self.Z.shape[1]
            per_pair = graph_bytes(self.torch_kernel, probe, probe + 0.25, True)[1]
            work += _SECOND_ORDER_FACTOR * prior_pairs * per_pair
        return SECONDS_PER_GRAPH_BYTE * work

    def _cheaper(self, with_prior: bool) -> str:
        if self.functional.scheme_for(self.kernel) is ClosedFormPath:
            return ("This kernel has exact closed-form integrated gradients: use "
                    "method='closed-form' (or 'auto'), instantaneous by comparison.")
        hint = getattr(self.kernel, "explanation_hint", "")
        return ("Use fewer training points (a sparse model)"
                + (", fewer n_steps, or return_cov=False." if with_prior else " or n_steps.")
                + (f" {hint}" if hint else ""))

    def prior_between(self, X1, X2):
        """``(1/B^2) sum_{b, b'} P(x_p; xt_b, x'_q; xt_b')`` by quadrature over both paths
        (``two_path_prior``; the Duffy rule where they share an end, so that a Matern kink
        there is integrated exponentially), and the one-path prior term (``path_prior``,
        what ``prior`` returns) where both are the same path, so the diagonal blocks equal
        the per-point covariance. Cost: about ``2 n_steps^2 B^2`` kernel mixed derivatives
        per pair of points (``point_pair_seconds``), memory bounded by ``chunk_rows``."""
        n1, n2, n_features = len(X1), len(X2), X1.shape[1]
        first, second = np.repeat(X1, n2, axis=0), np.tile(X2, (n1, 1))
        same_point = np.all(first == second, axis=1)
        n_steps, rows = self.functional.n_steps, self.chunk_rows()
        total = np.zeros((n1 * n2, n_features, n_features))
        for xt in self.baselines:
            for xt2 in self.baselines:
                same_path = same_point & np.array_equal(xt, xt2)
                if same_path.any():
                    total[same_path] += self.path_prior(first[same_path], xt)
                for start in range(0, n1 * n2, rows):
                    block = np.arange(start, min(start + rows, n1 * n2))
                    block = block[~same_path[block]]
                    if len(block):
                        total[block] += two_path_prior(
                            self.torch_kernel, np.broadcast_to(xt, first[block].shape),
                            first[block], np.broadcast_to(xt2, second[block].shape),
                            second[block], n_steps, self.pair_leaves)
        return (total / len(self.baselines) ** 2).reshape(n1, n2, n_features, n_features)

    def chunk_rows(self) -> int:
        """Pairs of points per call of ``two_path_prior``: its node pairs (``2 n_steps^2``
        per pair of points, two (D,) points each) within ``GRAPH_BUDGET_BYTES``."""
        node_pairs = 2 * (self.functional.n_steps + 1) ** 2
        return max(1, GRAPH_BUDGET_BYTES // (16 * self.Z.shape[1] * node_pairs))

    def point_pair_seconds(self) -> float:
        """Seconds one pair of explained points is estimated to cost in ``prior_between``
        (its kernel mixed derivatives priced as ``estimated_seconds`` prices the prior term,
        and at least ``_MIXED_DERIVATIVE_SECONDS`` each)."""
        probe = self.Z[np.arange(_PROBE_ROWS) % len(self.Z)]
        per_pair = graph_bytes(self.torch_kernel, probe, probe + 0.25, True)[1]
        node_pairs = 2 * self.functional.n_steps**2 * len(self.baselines) ** 2
        return node_pairs * max(_SECOND_ORDER_FACTOR * SECONDS_PER_GRAPH_BYTE * per_pair,
                                _MIXED_DERIVATIVE_SECONDS * self.Z.shape[1])


class StationaryQuadrature(_Quadrature):
    """Graded Gauss-Legendre cross term and single-integral prior term (radial leaves)."""

    @property
    def label(self) -> str:
        return f"graded Gauss-Legendre quadrature, n_steps={self.functional.n_steps}"

    @property
    def pair_leaves(self):
        return self.leaves

    def path_prior_pairs(self) -> int:
        # The lag rule: n_steps nodes, or 12 per geometric piece (at most ~60 pieces).
        return max(self.functional.n_steps, 60 * 12)

    def path_cross(self, X, baseline):
        n_steps = self.functional.n_steps
        return stationary_cross(self.torch_kernel, self.leaves, X, baseline, self.Z, n_steps)

    def path_prior(self, X, baseline):
        return stationary_prior(
            self.torch_kernel, X, baseline, self.functional.n_steps, self.leaves
        )


class PlainQuadrature(_Quadrature):
    """Seitz's construction with any rule (``integrated_gradient_functionals``).

    With the Gauss-Legendre rule the node count adapts per point: a point whose result misses
    the completeness identities (below) by more than ``_ADAPTIVE_RTOL`` of the kernel's
    scale is recomputed with twice the nodes, up to ``_ADAPTIVE_GROWTH`` times ``n_steps``
    and within ``MAX_PRIOR_EVALUATIONS`` (an oscillating kernel over many periods, a path far
    from the data). The identities are the error estimate: ``sum_i A[p, i, n] = k(x, z_n) -
    k(xt, z_n)``, ``sum_ij P[p, i, j] = k(x, x) + k(xt, xt) - 2 k(x, xt)`` and, for the mean,
    ``sum_i m[p, i] = (k(x, Z) - k(xt, Z)) alpha``. What is still missed is reported by the
    driver's ``CompletenessWarning``. The other rules are the papers' sums and stay as asked.
    """

    @property
    def label(self) -> str:
        return f"{self.functional.rule} quadrature, n_steps={self.functional.n_steps}"

    def path_prior_pairs(self) -> int:
        return len(self.nodes) * (len(self.nodes) + 1)  # with the staggered rule

    def path_cross_and_prior(self, X, baseline):
        # The cross term is refined by its own identity, as without the prior term: refined
        # jointly, a point whose prior term needed more nodes got a cross term (so a mean) on
        # other nodes than return_cov=False, and where neither converges (an oscillating
        # kernel over thousands of periods) the two means differed by 1e-3 with predictions
        # of 1e-16. The prior term's own refinement pays the cross term again (O(nodes n d),
        # against O(nodes^2 d^2) for the prior).
        return (self.path_cross(X, baseline),
                self._refined(X, baseline, with_prior=True)[1])

    def path_cross(self, X, baseline):
        # The mean alone skips the prior term's n_nodes^2 node pairs (trapezoid, 1024 steps,
        # 30 features: 90 s per point with them).
        return self._refined(X, baseline, with_prior=False)[0]

    def path_prior(self, X, baseline):
        return self.path_cross_and_prior(X, baseline)[1]

    def _refined(self, X, baseline, with_prior):
        """The cross term (and the prior term ``with_prior``) of one path, refined until the
        completeness identities of what was computed hold."""
        def evaluate(points, nodes, weights):
            result = integrated_gradient_functionals(
                self.torch_kernel, points, baseline, self.Z, nodes, weights, with_prior
            )
            return result if with_prior else result[:1]

        def gap(points, result):
            k_x, k_b = self.kernel(points, self.Z), self.kernel(baseline[None, :], self.Z)
            cross_gap = np.max(np.abs(result[0].sum(axis=1) - (k_x - k_b)), axis=1)
            k_xx, k_bb = self.kernel.diag(points), self.kernel.diag(baseline[None, :])
            if with_prior:
                k_xb = self.kernel(points, baseline[None, :])[:, 0]
                prior_gap = np.abs(result[1].sum(axis=(1, 2)) - (k_xx + k_bb - 2.0 * k_xb))
                cross_gap = np.maximum(cross_gap, prior_gap)
            return cross_gap / np.maximum(np.abs(k_xx), np.abs(k_bb))

        return self._adaptive(X, evaluate, gap)

    def _adaptive(self, X, evaluate, gap):
        """``evaluate(points, nodes, weights)`` (a tuple of per-point arrays), refined by
        doubling Gauss-Legendre nodes where ``gap(points, result)`` exceeds the tolerance."""
        result = tuple(np.array(part) for part in evaluate(X, self.nodes, self.weights))
        if self.functional.rule != "gauss-legendre":
            return result
        todo = gap(X, result) > _ADAPTIVE_RTOL
        n_nodes, n_features = len(self.nodes), X.shape[1]
        while todo.any():
            n_nodes *= 2
            if (n_nodes > _ADAPTIVE_GROWTH * self.functional.n_steps
                    or n_nodes * (n_nodes + 1) * n_features > MAX_PRIOR_EVALUATIONS):
                break
            nodes, weights = quadrature_rule("gauss-legendre", n_nodes)
            refined = evaluate(X[todo], nodes, weights)
            for part, new in zip(result, refined, strict=True):
                part[todo] = new
            todo[todo] = gap(X[todo], refined) > _ADAPTIVE_RTOL
        return result


def _refuse_matern_half(module) -> None:
    """Matern 1/2 anywhere in the kernel: f has no derivative, so no rule can integrate one
    (the graded rule found it among its radial leaves; the other rules returned numbers)."""
    import gpytorch

    for part in module.modules():
        if isinstance(part, gpytorch.kernels.MaternKernel) and part.nu < 1.0:
            raise ValueError(
                "a Matern kernel with nu=0.5 is not differentiable: integrated gradients of "
                "its GP do not exist, with any quadrature rule; use nu=1.5 or 2.5."
            )


@IntegratedGradient.register(Kernel)
def quadrature_scheme(functional: IntegratedGradient, kernel, Z: np.ndarray) -> _Quadrature:
    """Stationary (graded) quadrature where the kernel is built from radial leaves and the
    rule is Gauss-Legendre, plain quadrature otherwise.

    Raises
    ------
    ValueError
        ``n_steps`` not a positive integer, or a Matern 1/2 kernel (not differentiable).
    """
    nodes, weights = quadrature_rule(functional.rule, functional.n_steps)
    module = kernel.torch_kernel(Z.shape[1])
    _refuse_matern_half(module)
    leaves = None
    if functional.rule == "gauss-legendre":
        leaves = radial_leaves(module, Z.shape[1])
    if leaves is not None:
        return StationaryQuadrature(functional, kernel, Z, module, nodes, weights, leaves)
    return PlainQuadrature(functional, kernel, Z, module, nodes, weights)


# An output of a linear model of coregionalisation: each term's scheme, summed.
IntegratedGradient.register(CoregionalTerms)(term_scheme)
