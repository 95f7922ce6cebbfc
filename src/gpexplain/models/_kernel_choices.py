"""What ``GPRegressor(kernel=...)`` means: one small class per kind of kernel choice.

Each choice knows how to build its GPyTorch covariance module at a starting point (in the
standardised units the estimator fits in), what it is when hyperparameters are given
(``optimizer=None``), and how the fitted module reads in the original units of X and y. The
estimator asks its choice instead of branching on the kernel's name.

The conversions are exact: a kernel ``k_s`` fitted on standardised data is
``y_std^2 k_s((x - mean)/std, (x' - mean)/std)`` in original units, which for the named
stationary ARD kernels is the same kernel with lengthscales times the column standard
deviations and output scale times ``y_std^2``.
"""

from __future__ import annotations

import copy

import gpytorch
import numpy as np
import torch

from gpexplain._torch import as_tensor, to_numpy
from gpexplain.kernels import RBF, as_kernel
from gpexplain.kernels.gpytorch_adapter import input_scaled, squared_exponential
from gpexplain.models._fitting import LENGTHSCALE_LOWER_BOUND, log_uniform
from gpexplain.models._standardisation import original_lengthscales

__all__ = ["KERNELS", "KERNEL_NAMES", "kernel_choice"]

KERNELS = ("ard", "isotropic")  # the squared-exponential names (shared with SparseGPRegressor)
KERNEL_NAMES = KERNELS + ("matern52", "matern32", "rq")


class _NamedKernel:
    """``ScaleKernel`` of an ARD (or, for "isotropic", single-lengthscale) stationary kernel
    over the non-constant columns; constant columns are ignored."""

    sees_constant_columns = False
    # Fitted by L-BFGS-B on the closed-form likelihood gradient (models/_se_likelihood.py)
    # rather than through GPyTorch's autograd.
    analytic_gradient = False

    def __init__(self, name: str, given: RBF | None = None):
        self.name, self.given = name, given

    @property
    def has_values(self) -> bool:
        """Whether the choice carries hyperparameter values (usable with optimizer=None)."""
        return self.given is not None

    def is_ard(self, optimizer) -> bool:
        if self.given is not None:
            # A scalar lengthscale in original units is per-feature on standardised inputs:
            # kept exactly when not optimised, tied (isotropic) when optimised.
            return self.given.ard or optimizer is None
        return self.name != "isotropic"

    def first_start(self, scaling, ard: bool, y_scale: float):
        """(lengthscale, output scale) of the first start, standardised units."""
        if self.given is not None:
            return (scaling.standardised_lengthscales(self.given, ard),
                    self.given.variance / y_scale**2)
        return np.ones(scaling.active.size if ard else 1), 1.0

    def _base(self, ard_dims, bound, active_dims=None):
        raise NotImplementedError

    def module(self, start, index: int, rng):
        """Fresh covariance module set to a starting point (RQ alpha: 1 first, then drawn)."""
        lengthscale, outputscale, _ = start
        bound = gpytorch.constraints.GreaterThan(LENGTHSCALE_LOWER_BOUND)
        base = self._base(len(lengthscale) if len(lengthscale) > 1 else None, bound)
        module = gpytorch.kernels.ScaleKernel(base).double()
        base.lengthscale = as_tensor(lengthscale, like=base)
        module.outputscale = as_tensor(float(outputscale), like=module)
        self._set_shape(base, index, rng)
        return module

    def _set_shape(self, base, index, rng) -> None:
        """Shape parameters besides the lengthscales (none by default)."""

    def given_module(self, start, x_mean, x_scale, y_scale):
        # A given RBF stays an RBF: a GPyTorch round trip (softplus) would perturb its values.
        return RBF(start[0], start[1])

    def original_units(self, module, n_features, active, x_mean, x_scale, y_scale, optimizer):
        if isinstance(module, RBF):
            lengthscale, outputscale = module.lengthscale, module.variance * y_scale**2
        else:
            lengthscale = to_numpy(module.base_kernel.lengthscale).reshape(-1)
            outputscale = float(module.outputscale.detach()) * y_scale**2
        return self._in_original_units(module, lengthscale, outputscale, n_features, active,
                                       x_scale)

    def _in_original_units(self, module, lengthscale, outputscale, n_features, active, x_scale):
        # The same ARD kernel over the non-constant columns, lengthscales in the units of X
        # (the standardisation shift cancels in x - x').
        dims = None if active.size == n_features else as_tensor(active, dtype=torch.long)
        original = self._base(active.size, None, dims)
        # float64 before any value is set: a float32 parameter would round it.
        scaled = gpytorch.kernels.ScaleKernel(original).double()
        self._copy_shape(module.base_kernel, original)
        original.lengthscale = as_tensor(
            np.broadcast_to(lengthscale, (active.size,)) * x_scale, like=original
        )
        scaled.outputscale = as_tensor(outputscale, like=scaled)
        return as_kernel(scaled)

    def _copy_shape(self, fitted, original) -> None:
        """Copy shape parameters besides the lengthscales (none by default)."""


class _SquaredExponential(_NamedKernel):
    analytic_gradient = True

    def _base(self, ard_dims, bound, active_dims=None):
        return gpytorch.kernels.RBFKernel(ard_num_dims=ard_dims, lengthscale_constraint=bound)

    def _in_original_units(self, module, lengthscale, outputscale, n_features, active, x_scale):
        return RBF(original_lengthscales(lengthscale, x_scale, active, n_features), outputscale)


class _Matern(_NamedKernel):
    def __init__(self, name: str, nu: float):
        super().__init__(name)
        self.nu = nu

    def _base(self, ard_dims, bound, active_dims=None):
        options = {} if bound is None else {"lengthscale_constraint": bound}
        return gpytorch.kernels.MaternKernel(
            nu=self.nu, ard_num_dims=ard_dims, active_dims=active_dims, **options
        )


class _RationalQuadratic(_NamedKernel):
    def _base(self, ard_dims, bound, active_dims=None):
        options = {} if bound is None else {"lengthscale_constraint": bound}
        return gpytorch.kernels.RQKernel(ard_num_dims=ard_dims, active_dims=active_dims, **options)

    def _set_shape(self, base, index, rng) -> None:
        alpha = 1.0 if index == 0 else float(log_uniform(rng, 0.1, 10.0))
        base.alpha = as_tensor(alpha, like=base)

    def _copy_shape(self, fitted, original) -> None:
        original.alpha = fitted.alpha.detach().clone()


class _UserKernel:
    """A user's GPyTorch kernel: copied, trained on standardised data (its given values are
    the first start; restarts draw every lengthscale, output scale and RQ alpha it contains
    log-uniformly in [0.1, 10]) and reported through an exact input scaling."""

    sees_constant_columns = True  # it indexes columns itself (active_dims)
    analytic_gradient = False

    def __init__(self, kernel):
        self.kernel = kernel

    has_values = True

    def is_ard(self, optimizer) -> bool:
        return True

    def first_start(self, scaling, ard: bool, y_scale: float):
        return np.ones(scaling.active.size), 1.0

    def module(self, start, index: int, rng):
        module = copy.deepcopy(self.kernel).double()
        if index > 0:
            for child in module.modules():
                for name in ("lengthscale", "outputscale", "alpha"):
                    current = getattr(child, name, None) if hasattr(child, f"raw_{name}") \
                        else None
                    if isinstance(current, torch.Tensor):
                        setattr(child, name, as_tensor(
                            log_uniform(rng, 0.1, 10.0, current.shape), like=current))
        return module

    def given_module(self, start, x_mean, x_scale, y_scale):
        # k_s(xs, xs') = k(xs * std + mean, ...) / var_y, exactly.
        return input_scaled(
            copy.deepcopy(self.kernel), -x_mean / x_scale, 1.0 / x_scale, 1.0 / y_scale**2
        )

    def original_units(self, module, n_features, active, x_mean, x_scale, y_scale, optimizer):
        if optimizer is None:
            return as_kernel(copy.deepcopy(self.kernel))
        fitted_se = squared_exponential(module)
        if fitted_se is not None:  # closed-form explanations stay available
            lengthscale = fitted_se._lengthscales(n_features) * x_scale
            return RBF(lengthscale, fitted_se.variance * y_scale**2)
        return as_kernel(input_scaled(module, x_mean, x_scale, y_scale**2))


def kernel_choice(kernel):
    """The choice object for ``GPRegressor(kernel=...)``.

    Raises
    ------
    ValueError
        An unknown name or type; the message lists what is accepted.
    """
    if isinstance(kernel, RBF):
        return _SquaredExponential("ard" if kernel.ard else "isotropic", given=kernel)
    if isinstance(kernel, gpytorch.kernels.Kernel):
        return _UserKernel(kernel)
    choices = {
        "ard": lambda: _SquaredExponential("ard"),
        "isotropic": lambda: _SquaredExponential("isotropic"),
        "matern52": lambda: _Matern("matern52", 2.5),
        "matern32": lambda: _Matern("matern32", 1.5),
        "rq": lambda: _RationalQuadratic("rq"),
    }
    if isinstance(kernel, str) and kernel in choices:
        return choices[kernel]()
    raise ValueError(
        f"unknown kernel {kernel!r}; use one of {KERNEL_NAMES}, a gx.kernels.RBF or "
        "a gpytorch.kernels.Kernel."
    )
