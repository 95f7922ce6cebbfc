"""Input derivatives of kernels: the functionals behind gradient explanations (derivative process).

For f ~ GP(m0, k), the input gradient of f is again Gaussian (Seitz 2022, Sec. 4, eqs. 15-17,
with the docs/errata.md correction that the cross-covariance is the derivative in the *query*
argument
and the prior term is the derivative kernel, not k). The explanations need two kernel pieces:

    cross[p, i, n] = d/dx_i k(x, z_n)              at x = x_p            (p, d, n_basis)
    prior[p, i, j] = d^2/(dx_i dx'_j) k(x, x')     at x = x' = x_p       (p, d, d)

Closed forms for particular kernels (``gpexplain.kernels.RBF.gradient_cross``) are chosen by
the ``Gradient`` functional (``gpexplain.functionals.gradient``); this module serves every
GPyTorch kernel. ``gradient_cross`` takes one autograd backward pass over explicit (query,
basis) pairs of the kernel module. ``gradient_prior`` cannot use autograd: GPyTorch
returns a constant for coinciding inputs (no graph at all), and through zero distance the
derivative of the distance (a square root, or a clamped square) is not defined, so autograd
gives 0 or NaN for the mixed derivative. It is computed analytically instead, over the kernel
tree (``gpexplain.kernels.gpytorch_tree``, the walk ``radial_leaves`` uses too):

* stationary radial kernels ``k = s2 rho(r)``, ``r^2 = sum_i ((x_i - x'_i) / l_i)^2``:
  ``d_i d'_j k |_{x=x'} = delta_ij s2 (-rho''(0)) / l_i^2`` with ``-rho''(0)`` = 1 (RBF),
  5/3 (Matern 5/2), 3 (Matern 3/2) and 1 (rational quadratic, any alpha);
* GPyTorch's periodic kernel ``exp(-2 sum_i sin^2(pi (x_i - x'_i) / p_i) / l_i)``:
  ``delta_ij 4 pi^2 / (p_i^2 l_i)`` (its lengthscale is not squared);
* random Fourier features ``(1/M) sum_m cos(v_m . (x - x'))``, ``v_m = w_m / l``:
  ``(1/M) sum_m v_mi v_mj`` (``gpexplain.kernels.RandomFeatureKernel`` goes through it);
* linear ``v x.x'``: ``v delta_ij``; constant: 0;
* ``ScaleKernel`` multiplies by the output scale, ``AdditiveKernel`` sums, and
  ``ProductKernel`` uses the product rule
  ``d_i d'_j (k1 k2) = k1 d_i d'_j k2 + k2 d_i d'_j k1 + d_i k1 d'_j k2 + d_i k2 d'_j k1``,
  which is why every node also reports its value and first derivatives at x = x' (zero for the
  stationary kernels, nonzero for the linear one);
* ``active_dims`` and the input scaling of ``InputScaledKernel`` (user kernels fitted by
  ``GPRegressor`` on standardised data) are honoured by the chain rule: a leaf's derivatives
  in its own coordinates ``(x[dims] - shift) / scale`` are divided by ``scale`` and scattered
  back to the features it reads.

Matern 1/2 (the exponential kernel) is not mean-square differentiable: its derivative process
does not exist, and asking for it raises a ``ValueError``, as does any kernel type outside
``SUPPORTED_KERNELS``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpexplain._torch import as_tensor, to_numpy
from gpexplain.kernels.gpytorch_tree import Frame, KernelTreeVisitor

__all__ = [
    "SUPPORTED_KERNELS",
    "check_differentiable",
    "gradient_cross",
    "gradient_prior",
    "gradient_prior_between",
]

SUPPORTED_KERNELS = (
    "gpexplain RBF",
    "gpytorch RBFKernel",
    "MaternKernel (nu=1.5 or 2.5)",
    "RQKernel",
    "PeriodicKernel",
    "RFFKernel",
    "LinearKernel",
    "ConstantKernel",
    "ScaleKernel",
    "AdditiveKernel",
    "InputScaledKernel",
    "ProductKernel (and sums/products of these, with active_dims)",
)

# -rho''(0) of the radial profile rho(r), r the lengthscale-scaled distance, in GPyTorch's
# parameterisation (Matern: rho depends on sqrt(2 nu) r).
_MATERN_CURVATURE = {1.5: 3.0, 2.5: 5.0 / 3.0}


def gradient_cross(module, X: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """Cross-covariance of the gradient at X with f at Z, ``d/dx_i k(x_p, z_n)``, by autograd.

    Parameters
    ----------
    module : gpytorch.kernels.Kernel (float64)
        A kernel of a supported type (``check_differentiable``).
    X : ndarray (n_points, n_features)
        Query points; the derivative is taken in this argument (docs/errata.md: differentiating in
        the
        training-point argument flips the sign).
    Z : ndarray (n_basis, n_features)
        Training inputs or inducing points.

    Returns
    -------
    ndarray (n_points, n_features, n_basis)
        In units of the kernel variance per unit of x_i.

    Raises
    ------
    ValueError
        A kernel without a derivative process (Matern 1/2) or of an unsupported type.
    """
    import torch

    (n_points, n_features), n_basis = X.shape, Z.shape[0]
    left, _, values = _pair_values(module, X, Z, right_grad=False)
    (gradient,) = torch.autograd.grad(values.sum(), left, allow_unused=True, materialize_grads=True)
    return np.ascontiguousarray(
        to_numpy(gradient.reshape(n_points, n_basis, n_features).permute(0, 2, 1))
    )


def _pair_values(module, X1: np.ndarray, X2: np.ndarray, right_grad: bool):
    """``(left, right, k(left_r, right_r))`` over every pair (x1_p, x2_q), row r = p n2 + q,
    with gradients tracked on ``left`` (and on ``right`` with ``right_grad``)."""
    import torch

    n1, n2, n_features = X1.shape[0], X2.shape[0], X1.shape[1]
    check_differentiable(module, n_features)
    # Explicit pairs with diag=True: each pair's derivative is one backward pass away, and the
    # kernel sees x - z directly (GPyTorch's pairwise path expands |x|^2 + |z|^2 - 2 x.z, which
    # cancels when the inputs sit far from zero relative to the lengthscale).
    left = as_tensor(X1, like=module)[:, None, :].expand(-1, n2, -1)
    left = left.reshape(-1, n_features).clone().requires_grad_(True)
    right = as_tensor(X2, like=module)[None].expand(n1, -1, -1).reshape(-1, n_features)
    if right_grad:
        right = right.clone().requires_grad_(True)
    # GPyTorch kernels take a shortcut when their two arguments are equal tensors (every query
    # row equal to every basis row): some then use x1 for both arguments (a linear kernel
    # differentiates x.x and doubles the gradient), others return constants outside the
    # graph. One extra pair whose left point differs rules the shortcut out; it is dropped.
    values = module(torch.cat([left, left[:1].detach() + 1.0]),
                    torch.cat([right, right[:1].detach()]), diag=True)[:-1]
    return left, right, values


def gradient_prior(module, X: np.ndarray) -> np.ndarray:
    """Prior covariance of the gradient at each point: ``d_i d'_j k(x, x')`` at ``x = x' = x_p``.

    Parameters
    ----------
    module : gpytorch.kernels.Kernel (float64)
    X : ndarray (n_points, n_features)

    Returns
    -------
    ndarray (n_points, n_features, n_features)
        Symmetric positive semi-definite, in units of the kernel variance per unit of
        x_i x_j. Features the kernel ignores have zero rows and columns.

    Raises
    ------
    ValueError
        A kernel without a derivative process (Matern 1/2) or of an unsupported type; the
        message names the kernel and lists ``SUPPORTED_KERNELS``.
    """
    mixed = _SamePointDerivatives(X).visit(module, X.shape[1]).mixed
    return 0.5 * (mixed + np.swapaxes(mixed, 1, 2))


def gradient_prior_between(module, X1: np.ndarray, X2: np.ndarray,
                           coincide: np.ndarray | float = 0.0) -> np.ndarray:
    """Prior covariance of the gradients at two points, ``d_i d'_j k(x_p, x'_q)``, all pairs.

    Distinct points by autograd (a backward pass for ``d_i k`` with its graph kept, then one
    per feature i for ``d'_j d_i k``) over explicit pairs, as ``gradient_cross``; coinciding
    points (``|x_pi - x'_qi| <= coincide_i`` for every feature i) from the analytic
    ``gradient_prior``: through a zero distance autograd fails (module docstring), and near
    it the first derivatives of a radial kernel cancel, leaving a relative error of about
    eps / distance (1e-7 at 1e-9), while the same-point value errs by O(distance) (Matern 3/2)
    or O(distance^2). Cost O(n1 n2 d) kernel evaluations and d + 1 backward passes; shape
    (n1, n2, n_features, n_features).

    Raises
    ------
    ValueError
        A kernel without a derivative process (Matern 1/2) or of an unsupported type.
    """
    import torch

    left, right, values = _pair_values(module, X1, X2, right_grad=True)
    (n1, n_features), n2 = X1.shape, len(X2)
    mixed = np.zeros((n1 * n2, n_features, n_features))
    if values.requires_grad:
        (first,) = torch.autograd.grad(values.sum(), left, create_graph=True,
                                       allow_unused=True, materialize_grads=True)
        for i in range(n_features):
            if not first.requires_grad:
                break
            (second,) = torch.autograd.grad(first[:, i].sum(), right, retain_graph=True,
                                            allow_unused=True, materialize_grads=True)
            mixed[:, i, :] = to_numpy(second)
    mixed = mixed.reshape(n1, n2, n_features, n_features)
    rows, columns = np.nonzero(np.all(np.abs(X1[:, None, :] - X2[None, :, :]) <= coincide,
                                      axis=2))
    if len(rows):
        mixed[rows, columns] = gradient_prior(module, X1[rows])
    return mixed


def check_differentiable(module, n_features: int) -> None:
    """Raise ``ValueError`` unless the GPyTorch kernel has a derivative process we support.

    The check is the derivative recursion itself, run at one point, so that what is accepted
    here is exactly what ``gradient_prior`` can compute.
    """
    gradient_prior(module, np.zeros((1, n_features)))


@dataclass
class _SamePoint:
    """A kernel and its input derivatives at x = x', for a batch of points.

    value (p,) = k(x, x); left (p, d) = d/dx_i k(x, x'); right (p, d) = d/dx'_j k(x, x');
    mixed (p, d, d) = d^2/(dx_i dx'_j) k(x, x').
    """

    value: np.ndarray
    left: np.ndarray
    right: np.ndarray
    mixed: np.ndarray

    @classmethod
    def stationary(cls, X: np.ndarray, mixed: np.ndarray) -> _SamePoint:
        """A unit-variance stationary kernel: value 1, no first derivatives, the same ``mixed``
        (d, d) at every point."""
        n_points, n_features = X.shape
        zeros = np.zeros((n_points, n_features))
        mixed = np.broadcast_to(mixed, (n_points, n_features, n_features)).copy()
        return cls(np.ones(n_points), zeros, zeros.copy(), mixed)

    def scaled(self, factor: float) -> _SamePoint:
        return _SamePoint(
            factor * self.value, factor * self.left, factor * self.right, factor * self.mixed
        )

    def in_original_features(self, frame: Frame, n_features: int) -> _SamePoint:
        """Chain rule for ``x_local = (x[dims] - shift) / scale``: derivatives in x_local are
        divided by ``scale`` and summed into the original features they read."""
        n_points = self.value.shape[0]
        left = np.zeros((n_points, n_features))
        right = np.zeros((n_points, n_features))
        np.add.at(left.T, frame.dims, (self.left / frame.scale).T)
        np.add.at(right.T, frame.dims, (self.right / frame.scale).T)
        local_mixed = self.mixed / (frame.scale[:, None] * frame.scale[None, :])
        mixed = np.zeros((n_points, n_features, n_features))
        rows, cols = np.meshgrid(frame.dims, frame.dims, indexing="ij")
        np.add.at(np.moveaxis(mixed, 0, -1), (rows, cols), np.moveaxis(local_mixed, 0, -1))
        return _SamePoint(self.value, left, right, mixed)


def _unsupported(module, reason: str) -> ValueError:
    return ValueError(
        f"no gradient explanation for {type(module).__name__}: {reason}. Supported kernels: "
        f"{', '.join(SUPPORTED_KERNELS)}."
    )


class _SamePointDerivatives(KernelTreeVisitor[_SamePoint]):
    """The kernel and its derivatives at x = x' = each row of X, by the shared tree walk."""

    def __init__(self, X: np.ndarray):
        self.X = X

    def unsupported(self, module, reason: str) -> _SamePoint:
        raise _unsupported(module, reason)

    def scaled(self, result: _SamePoint, outputscale: float) -> _SamePoint:
        return result.scaled(outputscale)

    def sum(self, results) -> _SamePoint:
        parts = list(results)
        return _SamePoint(*(sum(getattr(p, f) for p in parts) for f in _FIELDS))

    def product(self, results) -> _SamePoint:
        results = iter(results)
        result = next(results)
        for other in results:
            v1, v2 = result.value[:, None], other.value[:, None]
            mixed = (
                v1[:, :, None] * other.mixed
                + v2[:, :, None] * result.mixed
                + result.left[:, :, None] * other.right[:, None, :]
                + other.left[:, :, None] * result.right[:, None, :]
            )
            result = _SamePoint(
                result.value * other.value,
                v1 * other.left + v2 * result.left,
                v1 * other.right + v2 * result.right,
                mixed,
            )
        return result

    def leaf(self, module, frame: Frame) -> _SamePoint:
        local = _leaf_derivatives(module, frame.local(self.X))
        return local.in_original_features(frame, self.X.shape[1])


def _leaf_derivatives(module, X: np.ndarray) -> _SamePoint:
    """What a leaf's ``forward(x, x')`` reports at x = x', in its own coordinates X."""
    import gpytorch.kernels as gk

    kind = type(module)  # exact types: subclasses (e.g. RBFKernelGrad) change the outputs
    if kind is gk.RBFKernel or kind is gk.RQKernel:
        return _SamePoint.stationary(X, np.diag(1.0 / _lengthscales(module, X) ** 2))
    if kind is gk.MaternKernel:
        nu = float(module.nu)
        if nu not in _MATERN_CURVATURE:
            raise _unsupported(
                module,
                f"nu={nu:g} is not mean-square differentiable, so its derivative process does "
                "not exist; use nu=1.5, nu=2.5 or an RBF kernel",
            )
        curvature = _MATERN_CURVATURE[nu] / _lengthscales(module, X) ** 2
        return _SamePoint.stationary(X, np.diag(curvature))
    if kind is gk.PeriodicKernel:
        lengthscale = _lengthscales(module, X)
        period = _broadcast(module, "period_length", module.period_length, X.shape[1])
        return _SamePoint.stationary(X, np.diag(4.0 * np.pi**2 / (period**2 * lengthscale)))
    if kind is gk.RFFKernel:
        # k = (1/M) sum_m cos(v_m . (x - x')) with v_m = w_m / l: d_i d'_j k = (1/M) sum_m
        # v_mi v_mj at x = x', a full (not diagonal) matrix.
        if not hasattr(module, "randn_weights"):
            raise ValueError(
                "RFFKernel has not drawn its random frequencies yet (GPyTorch draws them on "
                "first use); evaluate the kernel once or set randn_weights."
            )
        weights = to_numpy(module.randn_weights).astype(np.float64)  # (d, M)
        if weights.shape[0] != X.shape[1]:
            raise ValueError(
                f"RFFKernel has frequencies in {weights.shape[0]} dimensions but reads "
                f"{X.shape[1]} features."
            )
        frequencies = weights / _lengthscales(module, X)[:, None]
        return _SamePoint.stationary(X, frequencies @ frequencies.T / weights.shape[1])
    if kind is gk.LinearKernel:
        variance = _scalar(module.variance)
        n_points, n_features = X.shape
        mixed = np.broadcast_to(variance * np.eye(n_features), (n_points, n_features, n_features))
        return _SamePoint(
            variance * np.sum(X * X, axis=1), variance * X, variance * X, mixed.copy()
        )
    if kind is gk.ConstantKernel:
        n_points, n_features = X.shape
        zeros = np.zeros((n_points, n_features))
        return _SamePoint(
            np.full(n_points, _scalar(module.constant)),
            zeros,
            zeros.copy(),
            np.zeros((n_points, n_features, n_features)),
        )
    raise _unsupported(module, "its derivative kernel at coinciding points is not implemented")


_FIELDS = ("value", "left", "right", "mixed")


def _scalar(parameter) -> float:
    return float(parameter.detach().reshape(-1)[0])


def _lengthscales(module, X: np.ndarray) -> np.ndarray:
    return _broadcast(module, "lengthscale", module.lengthscale, X.shape[1])


def _broadcast(module, name: str, parameter, n_features: int) -> np.ndarray:
    """One positive value per feature the kernel reads (isotropic values are repeated)."""
    values = to_numpy(parameter).astype(np.float64).reshape(-1)
    if values.size == 1:
        return np.full(n_features, values[0])
    if values.size != n_features:
        raise ValueError(
            f"{type(module).__name__} has {values.size} {name} values but reads {n_features} "
            "features; set ard_num_dims (or active_dims) to match the inputs."
        )
    return values
