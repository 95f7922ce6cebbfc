"""The attribution as a process over inputs: its covariance across explained points.

Butler, Feng and Djuric (*Explainable Learning with Gaussian Processes*, 2024, Theorem 1):
integrated-gradient attributions of a GP are a GP over the inputs; so are gradients (Seitz
2022, the derivative process), exact Shapley values of product kernels and GPX weights, since
each is a linear functional ``L_x f`` of the latent f. Under a posterior in representer form
``(Z, a, Q)`` (DESIGN.md) the generic formula holds between two points as at one:

    Cov[L_i f(x_p), L_j f(x'_q)] = L_i L_j' k (x_p, x'_q)
                                   - (L_i k(., Z))(x_p) Q (L_j k(., Z))(x'_q)^T

with the functional's two-point prior term (``Scheme.prior_between``) and the same cross
terms as the per-point explanation. ``PointCovariance`` holds what that needs (the posterior,
the bound scheme, the functional and the points) and evaluates the (n_points, D, n_points, D)
matrix block by block, so memory is bounded by the block size, never by n_points^2 D^2
unless ``dense()`` is asked for. Gradient x input and GPX contributions weigh the blocks by
their output weights (``w_pi w_qj C``).

Cost, for n explained points in blocks of b: (n / b)^2 / 2 block pairs, each the two-point prior
term (RBF gradients: O(b^2 D^2); RBF integrated gradients: O(b^2 (S^2 + D^2)) with S =
``n_steps`` Gauss-Legendre nodes per path and B^2 baseline pairs; integrated gradients by
quadrature on a GPyTorch kernel: 2 S^2 B^2 kernel mixed derivatives by autograd per pair of
points, priced by ``PointCovariance.estimated_seconds``; product-kernel Shapley
values: O(b^2 R^2 m^2 D^2), m = ceil(D / 2), R reference rows; GPX: O(b^2 D^2)) plus the data
term, O(b D n_basis^2) to whiten two cross terms and O(b^2 D^2 n_basis) to contract them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from gpexplain.parallel import check_client
from gpexplain.point_covariance import MAX_DENSE_ENTRIES, BlockMatrix

__all__ = ["MAX_DENSE_ENTRIES", "MixturePointCovariance", "PointCovariance", "check_return_cov"]

#: Memory budget of one block pair's working set, in bytes.
_BLOCK_BUDGET_BYTES = 128 * 2**20
RETURN_COV = (True, False, "points")


def check_return_cov(return_cov) -> None:
    """``return_cov`` must be True, False or "points".

    Raises
    ------
    ValueError
        Anything else.
    """
    if not (return_cov is True or return_cov is False or (
            isinstance(return_cov, str) and return_cov == "points")):
        raise ValueError(
            f"return_cov must be True (covariance across features at each point), False (means "
            f"only) or 'points' (also the covariance across points), got {return_cov!r}."
        )


class _BlockTask(NamedTuple):
    """What every block pair needs: shipped to each Dask worker once."""

    posterior: object
    scheme: object
    functional: object
    X: np.ndarray
    cross: np.ndarray | None = None  # the cross terms of all points, when they fit


def point_block(rows1: np.ndarray, rows2: np.ndarray, task: _BlockTask) -> np.ndarray:
    """``Cov[attr(X[rows1]), attr(X[rows2])]``, shape (n1, D, n2, D) (module level for Dask)."""
    posterior, scheme, functional, X, cross = task
    X1, X2 = X[rows1], X[rows2]
    same = np.array_equal(rows1, rows2)
    if cross is not None:
        cross1, cross2 = cross[rows1], cross[rows2]
    else:
        cross1 = scheme.cross(X1)
        cross2 = cross1 if same else scheme.cross(X2)
    (n1, n_outputs, n_basis), n2 = cross1.shape, len(X2)
    data = posterior.quadratic_form(
        cross1.reshape(n1 * n_outputs, n_basis),
        None if same else cross2.reshape(n2 * n_outputs, n_basis),
    ).reshape(n1, n_outputs, n2, n_outputs)
    block = np.transpose(scheme.prior_between(X1, X2), (0, 2, 1, 3)) - data
    weights1, weights2 = functional.output_weights(X1), functional.output_weights(X2)
    if weights1 is not None:
        block = weights1[:, :, None, None] * block * weights2[None, None, :, :]
    if same:  # exactly symmetric, as the per-point covariance is
        block = 0.5 * (block + np.transpose(block, (2, 3, 0, 1)))
    return block


def _row_block(start1: int, task: tuple) -> list[tuple[int, np.ndarray]]:
    """All blocks (start1, start2 >= start1) of one block row (one Dask task)."""
    block_task, n_points, block_size = task
    rows1 = np.arange(start1, min(start1 + block_size, n_points))
    return [
        (start2, point_block(rows1, np.arange(start2, min(start2 + block_size, n_points)),
                             block_task))
        for start2 in range(start1, n_points, block_size)
    ]


def _row_block_chunk(starts: np.ndarray, task: tuple) -> tuple:
    """``iter_chunks`` adapter: one chunk is one block-row start."""
    return (_row_block(int(starts[0, 0]), task),)


class PointCovariance(BlockMatrix):
    """Covariance of an attribution across explained points and features, evaluated lazily.

    ``Attribution.point_cov`` when an explanation was asked with ``return_cov="points"``.
    Entry ``[p, i, q, j]`` is ``Cov[attr_i(x_p), attr_j(x_q)]``; on the diagonal blocks
    (p = q) it equals ``Attribution.cov[p]`` to the accuracy of the two-point prior term.

    Parameters
    ----------
    posterior : gpexplain.posterior.Posterior
    scheme : gpexplain.functionals.base.Scheme
        The bound scheme of the explanation (it must have ``prior_between``).
    functional : gpexplain.functionals.base.LinearFunctional
    X : ndarray (n_points, n_features)
        The validated query points (kernel inputs).
    block_size : int, optional
        Points per block (default: from a 128 MiB working set per block pair).
    client : distributed.Client, optional
        Compute the block rows of ``blocks()`` / ``dense()`` on this Dask cluster.

    Notes
    -----
    Cost: see the module docstring (``gpexplain.explain._points``); ``dense()`` holds
    ``(n_points D)^2`` float64 values and is refused above ``MAX_DENSE_ENTRIES``.
    """

    def __init__(self, posterior, scheme, functional, X: np.ndarray, block_size=None,
                 client=None):
        self._task = _BlockTask(posterior, scheme, functional, X)
        self.client = check_client(client)
        n_outputs = len(functional.output_names(posterior))
        self.shape = (len(X), n_outputs, len(X), n_outputs)
        self.output_map = None  # (G, D) linear map of the outputs (``grouped``)
        if block_size is None:
            n_steps = getattr(functional, "n_steps", 1)
            per_pair = 8 * (4 * n_steps**2 + 16 * n_outputs**2)
            block_size = int(np.clip(np.sqrt(_BLOCK_BUDGET_BYTES / per_pair), 8, 512))
        if isinstance(block_size, bool) or not isinstance(block_size, int | np.integer) or (
                block_size < 1):
            raise ValueError(f"block_size must be a positive integer, got {block_size!r}.")
        self.block_size = int(block_size)

    def block(self, rows1, rows2) -> np.ndarray:
        """``Cov[attr(x_p), attr(x_q)]`` for p in ``rows1``, q in ``rows2``: (n1, D, n2, D).

        Raises
        ------
        IndexError
            A row outside ``range(n_points)``.
        """
        rows1, rows2 = np.atleast_1d(np.asarray(rows1)), np.atleast_1d(np.asarray(rows2))
        for rows in (rows1, rows2):
            if rows.size and (rows.min() < -self.n_points or rows.max() >= self.n_points):
                raise IndexError(f"rows must lie in range({self.n_points}).")
        return self._mapped(point_block(rows1, rows2, self._task))

    def _mapped(self, block: np.ndarray) -> np.ndarray:
        if self.output_map is None:
            return block
        return np.einsum("gi,piqj,hj->pgqh", self.output_map, block, self.output_map)

    def grouped(self, matrix: np.ndarray) -> PointCovariance:
        """The covariance of the outputs ``matrix @ attr`` (e.g. ``Attribution.group``'s sums
        of features): ``M C M^T`` per block. ``matrix`` is (G, D)."""
        matrix = np.asarray(matrix, float)
        if matrix.ndim != 2 or matrix.shape[1] != self.n_outputs:
            raise ValueError(f"matrix must have shape (G, {self.n_outputs}).")
        copy = object.__new__(PointCovariance)
        copy.__dict__.update(self.__dict__)
        copy.output_map = matrix if self.output_map is None else matrix @ self.output_map
        copy.shape = (self.n_points, len(matrix), self.n_points, len(matrix))
        return copy

    def estimated_seconds(self) -> float:
        """Seconds all of ``blocks()`` is estimated to take: the scheme's two-point prior term
        for each of the n (n + 1) / 2 pairs of points (``Scheme.point_pair_seconds``: the
        quadrature schemes of GPyTorch kernels; 0 for the closed forms, whose cost is in the
        module docstring), before the data term."""
        n_points = self.n_points
        return self._task.scheme.point_pair_seconds() * n_points * (n_points + 1) / 2

    def blocks(self) -> Iterator[tuple[int, int, np.ndarray]]:
        """``(start1, start2, block)`` for every block pair with ``start2 >= start1`` (the
        lower blocks are the transposes), block rows computed on Dask with ``client``.

        Raises
        ------
        ValueError
            ``estimated_seconds()`` exceeds ``MAX_QUADRATURE_SECONDS`` per explained point
            (quadrature on a GPyTorch kernel over many points); ``block`` still evaluates
            chosen rows.
        """
        from gpexplain.functionals.integrated_gradient import MAX_QUADRATURE_SECONDS
        from gpexplain.parallel import iter_chunks

        seconds = self.estimated_seconds()
        if seconds > MAX_QUADRATURE_SECONDS * self.n_points:
            raise ValueError(
                f"the covariance across these {self.n_points} points would take about "
                f"{seconds:.3g} s ({self.n_points * (self.n_points + 1) // 2} pairs of points, "
                "each a double integral over two paths by quadrature on a "
                f"{type(self._task.scheme.torch_kernel).__name__}; limit "
                f"{MAX_QUADRATURE_SECONDS:g} s per point). "
                "Use fewer points, fewer n_steps, a kernel with a closed form "
                "(gx.kernels.RBF), or the blocks you need with point_cov.block(rows1, rows2)."
            )

        starts = np.arange(0, self.n_points, self.block_size)[:, None]
        task = (self._with_cross(), self.n_points, self.block_size)

        def points(first: int, stop: int) -> range:  # blocks first:stop of ``starts``
            return range(int(starts[first, 0]),
                         min(int(starts[stop - 1, 0]) + self.block_size, self.n_points))

        for (row,), start1 in zip(
            iter_chunks(_row_block_chunk, task, starts, 1, client=self.client, points=points,
                        held="the covariance with the others of "),
            starts[:, 0], strict=True,
        ):
            for start2, block in row:
                yield int(start1), start2, self._mapped(block)

    def _with_cross(self) -> _BlockTask:
        """The task with every point's cross term computed once (not once per block pair)
        when they fit in ``_BLOCK_BUDGET_BYTES``; as it is otherwise."""
        task = self._task
        if task.cross is not None:
            return task
        n_basis = len(task.posterior.train_inputs)
        if 8 * self.n_points * self._task_outputs() * n_basis > _BLOCK_BUDGET_BYTES:
            return task
        cross = np.concatenate([
            task.scheme.cross(task.X[start : start + self.block_size])
            for start in range(0, self.n_points, self.block_size)
        ]) if self.n_points else None
        self._task = task._replace(cross=cross)
        return self._task

    def _task_outputs(self) -> int:
        return self.shape[1] if self.output_map is None else self.output_map.shape[1]

    def __repr__(self) -> str:
        return (f"PointCovariance({self.n_points} points x {self.n_outputs} outputs, "
                f"blocks of {self.block_size})")


class MixturePointCovariance(BlockMatrix):
    """Covariance across points of the attribution of a ``MixturePosterior`` (not Gaussian).

    With component attributions ``N(mu_r, C_r)`` (each a ``PointCovariance``) and weights
    ``w_r``, the law of total covariance gives, block by block,
    ``C = sum_r w_r (C_r + mu_r mu_r^T) - mu mu^T``, ``mu = sum_r w_r mu_r``; ``sample`` draws
    from the mixture itself (a component, then its Gaussian), and ``gx.global_importance``
    combines the components' exact moments.

    Parameters
    ----------
    components : list of (mean (n, D), cov (n, D, D), PointCovariance)
    weights : ndarray (n_components,)
    """

    def __init__(self, components, weights):
        self.components, self.weights = list(components), np.asarray(weights, float)
        self.block_size = min(part[2].block_size for part in self.components)
        for _, _, covariance in self.components:  # the same blocks from every component
            covariance.block_size = self.block_size
        self.shape = self.components[0][2].shape
        self.mean = np.einsum("r,rpi->pi", self.weights, np.stack([c[0] for c in components]))

    def estimated_seconds(self) -> float:
        return sum(covariance.estimated_seconds() for _, _, covariance in self.components)

    def blocks(self) -> Iterator[tuple[int, int, np.ndarray]]:
        iterators = [covariance.blocks() for _, _, covariance in self.components]
        for parts in zip(*iterators, strict=True):
            start1, start2 = parts[0][0], parts[0][1]
            block = 0.0
            for weight, (mean, _, _), (_, _, part) in zip(self.weights, self.components, parts,
                                                         strict=True):
                rows1 = mean[start1 : start1 + part.shape[0]]
                rows2 = mean[start2 : start2 + part.shape[2]]
                block = block + weight * (part + np.einsum("pi,qj->piqj", rows1, rows2))
            rows1 = self.mean[start1 : start1 + block.shape[0]]
            rows2 = self.mean[start2 : start2 + block.shape[2]]
            yield start1, start2, block - np.einsum("pi,qj->piqj", rows1, rows2)

    def grouped(self, matrix: np.ndarray) -> MixturePointCovariance:
        """The covariance of ``matrix @ attr`` (``Attribution.group``)."""
        matrix = np.asarray(matrix, float)
        return MixturePointCovariance([
            (mean @ matrix.T, np.einsum("gi,pij,hj->pgh", matrix, cov, matrix),
             covariance.grouped(matrix))
            for mean, cov, covariance in self.components
        ], self.weights)

    def sample(self, mean: np.ndarray, n: int, rng) -> np.ndarray:
        """``n`` draws from the mixture: component counts ~ Multinomial(n, w), then each
        component's joint Gaussian; shuffled. ``mean`` is unused (the components carry it)."""
        counts = rng.multinomial(int(n), self.weights / self.weights.sum())
        draws = np.concatenate([
            covariance.sample(component_mean, count, rng)
            for count, (component_mean, _, covariance) in zip(counts, self.components,
                                                              strict=True) if count
        ])
        return draws[rng.permutation(len(draws))]

    def __repr__(self) -> str:
        return (f"MixturePointCovariance({len(self.components)} components, {self.n_points} "
                f"points x {self.n_outputs} outputs)")
