"""Covariance of explanations across points: what every such matrix offers, and a stored one.

An explanation asked with ``return_cov="points"`` carries ``point_cov``, the (n_points, D,
n_points, D) covariance of its values across points (``gpexplain.explain._points`` computes it
lazily, block by block). ``BlockMatrix`` is what every kind offers from its ``blocks()``: the
dense matrix, one output's (n, n) matrix and joint Gaussian draws. ``DensePointCovariance`` is
one held in memory, as ``gx.load`` reads a saved ``Attribution``'s back.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["MAX_DENSE_ENTRIES", "BlockMatrix", "DensePointCovariance"]

#: Largest (n_points D)^2 that ``dense()`` builds (2e8 float64 values: 1.6 GB).
MAX_DENSE_ENTRIES = 200_000_000


class BlockMatrix:
    """What every covariance across points offers from its ``blocks()``: the whole matrix,
    one feature's (n, n) matrix and joint Gaussian draws (shape ``(n, D, n, D)``)."""

    shape: tuple[int, int, int, int]

    @property
    def n_points(self) -> int:
        return self.shape[0]

    @property
    def n_outputs(self) -> int:
        return self.shape[1]

    def blocks(self) -> Iterator[tuple[int, int, np.ndarray]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def estimated_seconds(self) -> float:
        """Seconds all of ``blocks()`` is estimated to take (0: already computed, or closed
        forms whose cost is stated where they are built)."""
        return 0.0

    def feature_matrix(self, feature: int) -> np.ndarray:
        """``Cov[attr_i(x_p), attr_i(x_q)]`` for one output i over all points, (n, n), from
        the blocks (memory: one block pair plus the n x n result)."""
        if not 0 <= feature < self.n_outputs:
            raise IndexError(f"feature must lie in range({self.n_outputs}).")
        matrix = np.empty((self.n_points, self.n_points))
        for start1, start2, block in self.blocks():
            part = block[:, feature, :, feature]
            n1, n2 = part.shape
            matrix[start1 : start1 + n1, start2 : start2 + n2] = part
            matrix[start2 : start2 + n2, start1 : start1 + n1] = part.T
        return matrix

    def dense(self) -> np.ndarray:
        """The whole matrix, (n_points, D, n_points, D), exactly symmetric.

        Raises
        ------
        MemoryError
            More than ``MAX_DENSE_ENTRIES`` values; use ``blocks()``.
        """
        n, d = self.n_points, self.n_outputs
        if (n * d) ** 2 > MAX_DENSE_ENTRIES:
            raise MemoryError(
                f"the covariance across {n} points and {d} outputs has {(n * d) ** 2:.3g} "
                f"entries (limit {MAX_DENSE_ENTRIES:.3g}); iterate over PointCovariance.blocks()."
            )
        full = np.empty(self.shape)
        for start1, start2, block in self.blocks():
            n1, n2 = block.shape[0], block.shape[2]
            full[start1 : start1 + n1, :, start2 : start2 + n2] = block
            full[start2 : start2 + n2, :, start1 : start1 + n1] = np.transpose(block, (2, 3, 0, 1))
        return full

    def sample(self, mean: np.ndarray, n: int, rng) -> np.ndarray:
        """``n`` joint draws of ``N(mean, dense())``, (n, n_points, D)."""
        dense = self.dense().reshape(mean.size, mean.size)
        values, vectors = np.linalg.eigh(dense)
        root = vectors * np.sqrt(np.clip(values, 0.0, None))
        noise = rng.standard_normal((int(n), mean.size))
        return (mean.ravel() + noise @ root.T).reshape(int(n), *mean.shape)


class DensePointCovariance(BlockMatrix):
    """A covariance across points held as one array (n_points, D, n_points, D).

    Parameters
    ----------
    matrix : ndarray (n_points, D, n_points, D)

    Raises
    ------
    ValueError
        Not of that shape.
    """

    def __init__(self, matrix: np.ndarray):
        matrix = np.asarray(matrix, dtype=np.float64)
        if matrix.ndim != 4 or matrix.shape[:2] != matrix.shape[2:]:
            raise ValueError(f"a covariance across points has shape (n, D, n, D), got "
                             f"{matrix.shape}.")
        self.matrix, self.shape = matrix, matrix.shape

    def blocks(self) -> Iterator[tuple[int, int, np.ndarray]]:
        yield 0, 0, self.matrix

    def grouped(self, matrix: np.ndarray) -> DensePointCovariance:
        """The covariance of ``matrix @ values`` (G, D): ``M C M^T`` per pair of points."""
        matrix = np.asarray(matrix, float)
        if matrix.ndim != 2 or matrix.shape[1] != self.n_outputs:
            raise ValueError(f"matrix must have shape (G, {self.n_outputs}).")
        return DensePointCovariance(np.einsum("gi,piqj,hj->pgqh", matrix, self.matrix, matrix))

    def __repr__(self) -> str:
        return f"DensePointCovariance({self.n_points} points x {self.n_outputs} outputs)"
