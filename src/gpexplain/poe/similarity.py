"""Similarities between explained points (S, N x N) or between features (S~, D x D).

The robustness and smoothness losses of Tadesse et al., *Transparent trade-offs between
properties of explanations* (2025), Table 2 (f, h), weight squared differences of explanations
by a similarity. With the symmetrised similarity ``S_sym = (S + S^T) / 2`` (diagonal ignored,
since ``|w_n - w_n|^2 = 0``) and its graph Laplacian ``Lap(S) = diag(S_sym 1) - S_sym``,

    sum over ordered pairs (n, n') of S_nn' |w_n - w_n'|^2 = 2 tr(W^T Lap(S) W)

(every unordered pair is counted twice; see ``docs/errata.md``, "POE (Tadesse et al.)").

A ``Similarity`` is either a dense matrix or the uniform similarity ``S_nn' = c`` (n != n'),
whose Laplacian ``c (n I - 1 1^T)`` has the closed-form spectrum {0, c n}: the solvers use it
in O(N) instead of an O(N^3) eigendecomposition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpexplain._torch import to_numpy
from gpexplain._validation import as_feature_matrix

__all__ = ["Similarity", "as_similarity", "gaussian", "knn", "negative_precision", "uniform"]


@dataclass(frozen=True)
class Similarity:
    """A similarity between n items (points or features).

    Attributes
    ----------
    matrix : ndarray (n, n) or None
        Dense similarity; None for the uniform similarity.
    value : float
        The constant ``c`` of the uniform similarity (unused when ``matrix`` is given).
    description : str
        How it was built, e.g. ``"gaussian(lengthscale=0.5)"``; reported by the solvers.
    condition_number : float or None
        For ``negative_precision``: the 2-norm condition number of the jittered kernel matrix
        whose inverse was taken (how many digits the similarity may have lost).
    jitter : float or None
        For ``negative_precision``: the jitter added to the kernel's diagonal.
    """

    matrix: np.ndarray | None = None
    value: float = 1.0
    description: str = "uniform"
    condition_number: float | None = None
    jitter: float | None = None

    @property
    def is_uniform(self) -> bool:
        return self.matrix is None

    def symmetric(self, n: int) -> np.ndarray:
        """Dense ``S_sym`` (n, n) with a zero diagonal."""
        if self.is_uniform:
            dense = np.full((n, n), self.value)
        else:
            dense = 0.5 * (self.matrix + self.matrix.T)
        dense = dense.copy()
        np.fill_diagonal(dense, 0.0)
        return dense

    def laplacian(self, n: int) -> np.ndarray:
        """Dense graph Laplacian ``diag(S_sym 1) - S_sym`` (n, n)."""
        sym = self.symmetric(n)
        return np.diag(sym.sum(axis=1)) - sym

    def spectrum(self, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Eigenvalues and eigenvectors of the Laplacian; eigenvectors None when uniform.

        Uniform: eigenvalue 0 on the constant vector and ``c n`` on its complement, returned
        as ``[0, c n]`` (the solvers split a matrix into its column means and deviations).
        """
        if self.is_uniform:
            return np.array([0.0, self.value * n]), None
        values, vectors = np.linalg.eigh(self.laplacian(n))
        return values, vectors

    def pair_sum(self, W: np.ndarray) -> float:
        """``sum over ordered pairs (n, n') of S_nn' |w_n - w_n'|^2`` for the rows of W."""
        n = W.shape[0]
        if self.is_uniform:
            # sum_{n,n'} |w_n - w_n'|^2 = 2 (n sum |w_n|^2 - |sum w_n|^2), exact and O(n d).
            centred = W - W.mean(axis=0)
            return float(2.0 * self.value * n * np.sum(centred**2))
        from scipy.spatial.distance import cdist

        return float(np.sum(self.symmetric(n) * cdist(W, W, "sqeuclidean")))


def as_similarity(S, n: int, name: str = "S") -> Similarity:
    """A ``Similarity`` for n items from None or "uniform" (uniform 1), a Similarity or a matrix.

    Raises TypeError for other types and ValueError for a matrix of the wrong shape or with a
    NaN/inf entry.
    """
    if S is None or (isinstance(S, str) and S == "uniform"):
        return Similarity()
    if isinstance(S, str):
        raise ValueError(
            f"{name} must be None, 'uniform', a gx.poe.similarity.Similarity or an ({n}, {n}) "
            f"matrix, got the string {S!r}."
        )
    if isinstance(S, Similarity):
        if S.matrix is not None and S.matrix.shape != (n, n):
            raise ValueError(
                f"{name} is a similarity between {S.matrix.shape[0]} items; {n} needed."
            )
        return S
    matrix = np.asarray(to_numpy(S))
    if matrix.dtype == object or not np.issubdtype(matrix.dtype, np.number):
        raise TypeError(f"{name} must be a numeric ({n}, {n}) matrix, got dtype {matrix.dtype}.")
    matrix = matrix.astype(np.float64)
    if matrix.shape != (n, n):
        raise ValueError(f"{name} must have shape ({n}, {n}), got {matrix.shape}.")
    if not np.all(np.isfinite(matrix)):
        raise ValueError(f"{name} has a NaN or inf entry.")
    return Similarity(matrix=matrix, description="matrix")


def uniform(value: float = 1.0) -> Similarity:
    """Uniform similarity ``S_nn' = value`` for every pair (the paper's Sec. 6.1 choice).

    Raises ValueError unless ``value`` is finite and > 0.
    """
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"value must be finite and > 0, got {value!r}.")
    return Similarity(value=value, description=f"uniform(value={value:g})")


def _lengthscale(lengthscale, n_features: int) -> np.ndarray:
    scale = np.asarray(lengthscale, dtype=np.float64)
    if scale.ndim == 0:
        scale = np.full(n_features, float(scale))
    if scale.shape != (n_features,) or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise ValueError(
            f"lengthscale must be a finite number > 0 or {n_features} of them (one per "
            f"feature), got {lengthscale!r}."
        )
    return scale


def _squared_distances(X: np.ndarray, lengthscale: np.ndarray) -> np.ndarray:
    scaled = X / lengthscale
    return np.sum((scaled[:, None, :] - scaled[None, :, :]) ** 2, axis=2)


def gaussian(X, lengthscale) -> Similarity:
    """Gaussian similarity ``s(x, x') = exp(-|x - x'|^2 / (2 lengthscale^2))`` (zero diagonal).

    Parameters
    ----------
    X : array-like (n_points, n_features)
    lengthscale : float or array-like (n_features,)
        In the units of X; a vector gives one lengthscale per feature.

    Raises
    ------
    ValueError
        Bad X or a lengthscale that is not finite and positive.
    """
    X, _ = as_feature_matrix(X, "X")
    scale = _lengthscale(lengthscale, X.shape[1])
    matrix = np.exp(-0.5 * _squared_distances(X, scale))
    np.fill_diagonal(matrix, 0.0)
    return Similarity(matrix=matrix, description=f"gaussian(lengthscale={scale.tolist()})")


def knn(X, k: int) -> Similarity:
    """k-nearest-neighbour similarity: 1 when either point is among the other's k nearest.

    Neighbours by Euclidean distance (scikit-learn ``NearestNeighbors``), symmetrised by "or".

    Raises
    ------
    ValueError
        Bad X, or k not an integer with 1 <= k < n_points.
    """
    from sklearn.neighbors import NearestNeighbors

    X, _ = as_feature_matrix(X, "X", min_rows=2)
    n = X.shape[0]
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k < n:
        raise ValueError(
            f"k must be an integer with 1 <= k < {n} (the number of points), got {k!r}."
        )
    neighbours = NearestNeighbors(n_neighbors=int(k) + 1).fit(X)
    _, index = neighbours.kneighbors(X)
    matrix = np.zeros((n, n))
    for row, columns in enumerate(index):
        matrix[row, columns] = 1.0
    matrix = np.maximum(matrix, matrix.T)
    np.fill_diagonal(matrix, 0.0)
    return Similarity(matrix=matrix, description=f"knn(k={int(k)})")


def negative_precision(
    kernel_matrix, jitter: float = 1e-8, max_condition: float = 1e12
) -> Similarity:
    """Similarity ``S = -offdiag((K + jitter * mean(diag K) I)^{-1})`` of Appendix A.

    Tadesse et al. (2025), Appendix A and Sec. 4, take the similarity to be minus the precision
    of a kernel, ``s = -k^{-1}``. For a Gaussian kernel the kernel matrix is nearly singular
    (condition numbers around 1e9 and more), so a relative ``jitter`` is added to the diagonal
    and the condition number is measured and stored on the result (``condition_number``);
    entries can be large and negative (see ``docs/errata.md``). The diagonal of the
    precision does not enter the pairwise losses and is dropped.

    Parameters
    ----------
    kernel_matrix : array-like (n, n)
        Symmetric positive semi-definite kernel matrix, e.g. ``gx.kernels.RBF(0.5)(X, X)``.
    jitter : float, default 1e-8
        Added to the diagonal, relative to the mean diagonal entry; >= 0.
    max_condition : float, default 1e12
        A larger condition number after jitter raises: the precision would have no correct
        digit beyond ``1e16 / condition``.

    Raises
    ------
    ValueError
        Not a finite symmetric square matrix, negative jitter, not positive definite after
        jitter, or a condition number above ``max_condition`` (increase ``jitter``).
    """
    K = np.asarray(to_numpy(kernel_matrix), dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or not np.all(np.isfinite(K)):
        raise ValueError(f"kernel_matrix must be a finite square matrix, got shape {K.shape}.")
    scale = max(float(np.max(np.abs(K))), np.finfo(float).tiny)
    if np.max(np.abs(K - K.T)) > 1e-10 * scale:
        raise ValueError("kernel_matrix must be symmetric.")
    if not np.isfinite(jitter) or jitter < 0:
        raise ValueError(f"jitter must be finite and >= 0, got {jitter!r}.")
    if not max_condition > 1:
        raise ValueError(f"max_condition must be a number > 1, got {max_condition!r}.")
    added = float(jitter) * float(np.mean(np.diag(K)))
    values, vectors = np.linalg.eigh(0.5 * (K + K.T) + added * np.eye(K.shape[0]))
    if values[0] <= 0:
        raise ValueError(
            f"kernel_matrix + jitter is not positive definite (smallest eigenvalue "
            f"{values[0]:.3g}); increase jitter."
        )
    condition = float(values[-1] / values[0])
    if condition > max_condition:
        raise ValueError(
            f"kernel_matrix + jitter has condition number {condition:.3g} > max_condition "
            f"{max_condition:.3g}; increase jitter (now {jitter:g}) or use a shorter lengthscale."
        )
    precision = (vectors / values) @ vectors.T
    matrix = -0.5 * (precision + precision.T)
    np.fill_diagonal(matrix, 0.0)
    return Similarity(
        matrix=matrix,
        description=f"negative_precision(jitter={jitter:g})",
        condition_number=condition,
        jitter=added,
    )
