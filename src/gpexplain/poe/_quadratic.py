"""The quadratic part of the transductive POE objective and its exact solution.

With F_grad, F_func, R_avg and S (Tadesse et al. 2025, Table 2 d-f, h) the objective is

    Q(W) = lF |W - G|^2 + lFf sum_n (w_n . x_n - f_n)^2 + lR R_avg(W) + lS S(W)
         = <W, A(W)> - 2 <B, W> + c

with ``R_avg = 2 tr(W^T Lap(S) W)``, ``S = 2 tr(W Lap(S~) W^T)`` and

    A(W) = lF W + lFf diag(W x) X + 2 lR Lap(S) W + 2 lS W Lap(S~)
    B    = lF G + lFf diag(f) X,          c = lF |G|^2 + lFf |f|^2.

The normal equations ``A(W) = B`` (``docs/errata.md``) are a Sylvester equation when
lFf = 0: in the eigenbases ``Lap(S) = U a U^T`` and ``Lap(S~) = V b V^T`` it is diagonal,
``W = U [(U^T B V) / (lF + 2 lR a_i + 2 lS b_j)] V^T``; O(N D) for the uniform similarity,
O(N^3 + N^2 D) otherwise. F_func couples the features of each point; the system is then
solved by conjugate gradients preconditioned with that Sylvester solve.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpexplain.poe._inputs import POESolverError
from gpexplain.poe.similarity import Similarity

# Eigenvalues of A within ZERO_ROUNDING * (n d) * eps * max|eigenvalue| of zero are zero to
# working precision: eigh's eigenvalues carry errors of a few eps * size * |A|, so an exact-zero
# test (a Laplacian's zero eigenvalue comes out as +-1e-16) decides uniqueness by rounding.
ZERO_ROUNDING = 10.0
# With F_func and a Sylvester part that is not positive definite, the smallest eigenvalue of A
# is computed from the dense (n d) x (n d) operator up to this many unknowns (eigvalsh, about a
# second), and by Lanczos (ARPACK) beyond.
DENSE_EIGENVALUE_LIMIT = 2000


@dataclass
class QuadraticProblem:
    """Data of the quadratic part of a transductive POE objective (validated inputs)."""

    X: np.ndarray
    G: np.ndarray
    f: np.ndarray | None
    weights: dict[str, float]
    points: Similarity
    features: Similarity
    _point_spectrum: tuple = field(init=False, repr=False)
    _feature_spectrum: tuple = field(init=False, repr=False)
    _smallest: float | None = field(init=False, default=None, repr=False)

    def __post_init__(self):
        n, d = self.X.shape
        self._point_spectrum = self.points.spectrum(n) if self.weights["R_avg"] else None
        self._feature_spectrum = self.features.spectrum(d) if self.weights["S"] else None

    # -- the operator ---------------------------------------------------------------------
    @property
    def uses_function(self) -> bool:
        return self.weights["F_func"] > 0.0

    def rhs(self) -> np.ndarray:
        B = self.weights["F_grad"] * self.G
        if self.uses_function:
            B = B + self.weights["F_func"] * self.f[:, None] * self.X
        return B

    def constant(self) -> float:
        c = self.weights["F_grad"] * float(np.sum(self.G**2))
        if self.uses_function:
            c += self.weights["F_func"] * float(np.sum(self.f**2))
        return c

    def apply(self, W: np.ndarray) -> np.ndarray:
        """``A(W)``."""
        out = self.weights["F_grad"] * W
        if self.uses_function:
            out = out + self.weights["F_func"] * np.sum(W * self.X, axis=1)[:, None] * self.X
        if self.weights["R_avg"]:
            out = out + 2.0 * self.weights["R_avg"] * self._laplacian_points(W)
        if self.weights["S"]:
            out = out + 2.0 * self.weights["S"] * self._laplacian_features(W)
        return out

    def value(self, W: np.ndarray) -> float:
        """``Q(W) = <W, A W> - 2 <B, W> + c``."""
        return float(np.sum(W * self.apply(W)) - 2.0 * np.sum(self.rhs() * W) + self.constant())

    def _laplacian_points(self, W):
        if self.points.is_uniform:
            return self.points.value * W.shape[0] * (W - W.mean(axis=0))
        return self.points.laplacian(W.shape[0]) @ W

    def _laplacian_features(self, W):
        if self.features.is_uniform:
            return self.features.value * W.shape[1] * (W - W.mean(axis=1, keepdims=True))
        return W @ self.features.laplacian(W.shape[1])

    # -- the Sylvester part ---------------------------------------------------------------
    def denominators(self, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Eigenvalues of ``A`` without F_func, over (point, feature) eigenpairs, + shift."""
        lF = self.weights["F_grad"] + shift
        a = (2.0 * self.weights["R_avg"] * self._point_spectrum[0]
             if self._point_spectrum is not None else np.zeros(1))
        b = (2.0 * self.weights["S"] * self._feature_spectrum[0]
             if self._feature_spectrum is not None else np.zeros(1))
        return lF + a[:, None] + b[None, :], (a, b)

    def zero_tolerance(self) -> float:
        """Eigenvalues of ``A`` this close to zero are zero to working precision:
        ``ZERO_ROUNDING * (n d) * eps`` times the bound on the largest eigenvalue."""
        n, d = self.X.shape
        return ZERO_ROUNDING * n * d * np.finfo(float).eps * self.largest_eigenvalue_bound()

    def smallest_eigenvalue(self) -> float:
        """``lambda_min(A)``, or a lower bound on it (cached).

        Exact from the Laplacians' spectra without F_func. With F_func (a positive
        semi-definite term) the Sylvester part's smallest eigenvalue is a lower bound when it
        is positive; otherwise (no F_grad, or an indefinite similarity) F_func decides, and
        the eigenvalue of the full operator is computed (dense, or Lanczos beyond
        ``DENSE_EIGENVALUE_LIMIT`` unknowns).
        """
        if self._smallest is None:
            smallest = float(self.denominators()[0].min())
            if self.uses_function and smallest <= self.zero_tolerance():
                smallest = self._smallest_eigenvalue_with_function()
            self._smallest = smallest
        return self._smallest

    def _smallest_eigenvalue_with_function(self) -> float:
        from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

        n, d = self.X.shape
        if n * d <= DENSE_EIGENVALUE_LIMIT:
            dense = np.stack([self.apply(unit.reshape(n, d)).ravel() for unit in np.eye(n * d)])
            return float(np.linalg.eigvalsh(dense)[0])
        operator = LinearOperator(
            (n * d, n * d), matvec=lambda v: self.apply(v.reshape(n, d)).ravel(), dtype=float
        )
        try:
            return float(eigsh(operator, k=1, which="SA", return_eigenvectors=False)[0])
        except ArpackNoConvergence as error:
            raise POESolverError(
                "could not certify that the objective has a unique minimiser (Lanczos did not "
                "find the smallest eigenvalue of its quadratic part); give lambdas['F_grad'] a "
                "weight > 0."
            ) from error

    def require_unique_minimiser(self) -> float:
        """The certified ``lambda_min(A) > 0`` (strict convexity), or ValueError.

        Raises
        ------
        ValueError
            ``A`` has a negative eigenvalue (the objective is unbounded below: an indefinite
            similarity Laplacian, named) or one that is zero to working precision (a whole
            line of minimisers), with the F_grad weight that would make it positive.
        """
        smallest = self.smallest_eigenvalue()
        tolerance = self.zero_tolerance()
        if smallest > tolerance:
            return smallest
        needed = self.weights["F_grad"] - smallest + tolerance
        remedy = f"Raise lambdas['F_grad'] above {needed:.3g}"
        if smallest < -tolerance:
            raise ValueError(
                f"the objective is unbounded below (it has no minimiser): its quadratic part "
                f"has the negative eigenvalue {smallest:.3g}{self._indefinite_similarities()}. "
                f"{remedy}, or use a similarity with a positive semi-definite Laplacian (non-"
                "negative entries: gx.poe.similarity.gaussian, knn or uniform)."
            )
        raise ValueError(
            f"the objective has no unique minimiser: its quadratic part is singular (smallest "
            f"eigenvalue {smallest:.3g}, zero to working precision {tolerance:.2g}). {remedy} "
            "(F_grad = 0 leaves explanations that R_avg, S and F_func do not see undetermined)."
        )

    def _indefinite_similarities(self) -> str:
        """``": the Laplacian of S ... has the negative eigenvalue ..."`` for each culprit."""
        culprits = []
        for name, weight, similarity, spectrum in (
            ("S", "R_avg", self.points, self._point_spectrum),
            ("S_tilde", "S", self.features, self._feature_spectrum),
        ):
            if spectrum is None:
                continue
            values = spectrum[0]
            # a positive semi-definite Laplacian's zero eigenvalue may come out as -1e-16
            if values.min() >= -ZERO_ROUNDING * len(values) * np.finfo(float).eps * np.max(
                    np.abs(values)):
                continue
            pairs = 0 if similarity.is_uniform else int(
                np.sum(similarity.symmetric(len(values)) < 0)) // 2
            negative = f", from its {pairs} negative pair(s)" if pairs else ""
            culprits.append(f"the Laplacian of {name} (weighted by lambdas['{weight}']) has the "
                            f"negative eigenvalue {values.min():.3g}{negative}")
        return ": " + "; ".join(culprits) if culprits else ""

    def sylvester_solve(self, C: np.ndarray, shift: float = 0.0) -> np.ndarray:
        """Solve ``(A without F_func + shift I)(W) = C`` exactly through the eigenbases (the
        caller makes sure the operator is positive definite)."""
        values, _ = self.denominators(shift)
        C = self._to_feature_basis(C)
        C = self._to_point_basis(C, values)
        return self._from_feature_basis(C)

    def _to_feature_basis(self, C):
        if self._feature_spectrum is None:
            return C
        if self.features.is_uniform:
            mean = C.mean(axis=1, keepdims=True)
            return np.concatenate([mean, C - mean], axis=1)  # (n, 1 + d): mean, deviations
        return C @ self._feature_spectrum[1]

    def _from_feature_basis(self, C):
        if self._feature_spectrum is None:
            return C
        if self.features.is_uniform:
            return C[:, :1] + C[:, 1:]
        return C @ self._feature_spectrum[1].T

    def _feature_index(self, n_columns: int) -> np.ndarray:
        """Which eigenvalue of the feature spectrum each column of the rotated C carries."""
        if self._feature_spectrum is None:
            return np.zeros(n_columns, dtype=int)
        if self.features.is_uniform:
            return np.r_[0, np.ones(n_columns - 1, dtype=int)]
        return np.arange(n_columns)

    def _to_point_basis(self, C, values):
        columns = self._feature_index(C.shape[1])
        if self._point_spectrum is None:
            return C / values[0, columns]
        if self.points.is_uniform:
            mean = C.mean(axis=0, keepdims=True)
            return mean / values[0, columns] + (C - mean) / values[1, columns]
        U = self._point_spectrum[1]
        return U @ ((U.T @ C) / values[:, columns])

    # -- the full solve -------------------------------------------------------------------
    def solve(self, rtol: float = 1e-12, maxiter: int = 10_000) -> tuple[np.ndarray, dict]:
        """Minimise Q exactly; returns W and a certificate (residual, error bound).

        Raises
        ------
        ValueError
            No unique minimiser.
        POESolverError
            Conjugate gradients did not reach ``rtol`` (relative residual) in ``maxiter``.
        """
        return self.solve_rhs(self.rhs(), rtol, maxiter)

    def solve_rhs(self, B: np.ndarray, rtol: float = 1e-12, maxiter: int = 10_000):
        """Solve ``A(W) = B`` for any right-hand side; returns W and its certificate."""
        self.require_unique_minimiser()
        if not self.uses_function:
            W = self.sylvester_solve(B)
            return W, self._certificate(W, B, "eigendecomposition", 0)
        return self._conjugate_gradients(B, rtol, maxiter)

    def largest_eigenvalue_bound(self) -> float:
        """An upper bound on the largest eigenvalue of ``A`` (F_func adds at most
        ``lFf max_n |x_n|^2``)."""
        values, _ = self.denominators()
        bound = float(np.max(np.abs(values)))
        if self.uses_function:
            bound += self.weights["F_func"] * float(np.max(np.sum(self.X**2, axis=1)))
        return bound

    def data_scale(self) -> float:
        """``max |G|`` (and ``max |f|`` with F_func): convex solvers work on the data divided
        by it (``docs/errata.md``, rescale first); 1 for all-zero data."""
        scale = float(np.max(np.abs(self.G)))
        if self.uses_function:
            scale = max(scale, float(np.max(np.abs(self.f))))
        return scale if scale > 0 else 1.0

    def scaled(self, factor: float) -> QuadraticProblem:
        """The same problem with G and f divided by ``factor`` (its minimiser is W* / factor)."""
        scaled = QuadraticProblem(
            self.X, self.G / factor, None if self.f is None else self.f / factor,
            self.weights, self.points, self.features,
        )
        scaled._smallest = self._smallest  # the operator A does not depend on G or f
        return scaled

    def _conjugate_gradients(self, B, rtol, maxiter):
        from scipy.sparse.linalg import LinearOperator, cg

        n, d = self.X.shape
        base = float(self.denominators()[0].min())
        tolerance = self.zero_tolerance()
        # Without F_grad the Sylvester part is singular on the constant explanations (or
        # indefinite, with negative similarities, where F_func makes A positive definite); a
        # shift past its smallest eigenvalue by the F_func curvature keeps the preconditioner
        # SPD (only its speed depends on it, not the solution).
        shift = 0.0 if base > tolerance else (
            tolerance - base + self.weights["F_func"] * float(np.mean(self.X**2)))
        operator = LinearOperator(
            (n * d, n * d), matvec=lambda v: self.apply(v.reshape(n, d)).ravel(), dtype=float
        )
        preconditioner = LinearOperator(
            (n * d, n * d),
            matvec=lambda v: self.sylvester_solve(v.reshape(n, d), shift).ravel(),
            dtype=float,
        )
        start = self.sylvester_solve(B, shift)
        iterations = [0]

        def count(_):
            iterations[0] += 1

        vector, _ = cg(operator, B.ravel(), x0=start.ravel(), rtol=rtol, atol=0.0,
                       maxiter=maxiter, M=preconditioner, callback=count)
        W = vector.reshape(n, d)
        certificate = self._certificate(W, B, "preconditioned conjugate gradients", iterations[0])
        if not certificate["relative_residual"] <= 10 * rtol:
            remedy = ("raise max_iter" if iterations[0] >= maxiter else
                      "the conditioning limits the residual reached")
            raise POESolverError(
                f"conjugate gradients stopped at relative residual "
                f"{certificate['relative_residual']:.3g} > {rtol:g} after {iterations[0]} "
                f"iterations (smallest eigenvalue {self.smallest_eigenvalue():.3g} of "
                f"{self.largest_eigenvalue_bound():.3g}); {remedy}, or raise lambdas['F_grad']."
            )
        return W, certificate

    def _certificate(self, W, B, method, iterations) -> dict:
        """Residual of the normal equations and what it certifies.

        ``Q(W) - min Q = r^T A^{-1} r <= |r|^2 / lambda_min(A)`` and
        ``|W - W*| <= |r| / lambda_min(A)``, with ``lambda_min(A)`` (or its lower bound) from
        ``smallest_eigenvalue``, positive once ``require_unique_minimiser`` has passed.
        """
        residual = B - self.apply(W)
        norm = float(np.linalg.norm(residual))
        scale = max(float(np.linalg.norm(B)), np.finfo(float).tiny)
        smallest = self.smallest_eigenvalue()
        return {
            "method": method,
            # a residual above tolerance raises before a result is returned
            "status": "optimal",
            "iterations": int(iterations),
            "residual_norm": norm,
            "relative_residual": norm / scale,
            "smallest_eigenvalue_bound": smallest,
            "error_bound": norm / smallest,
            "suboptimality_bound": norm**2 / smallest,
        }
