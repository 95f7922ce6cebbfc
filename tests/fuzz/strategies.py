"""Hypothesis strategies for small GP problems with adversarial scales."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

KERNELS = ("rbf", "gpytorch-rbf", "matern52", "matern32", "rq", "periodic")
GRADIENT_KERNELS = (*KERNELS, "linear")


def log_uniform(low: float, high: float):
    return st.floats(np.log10(low), np.log10(high)).map(lambda e: float(10.0**e))


@st.composite
def problems(draw, kernels=KERNELS):
    """(X, y, kernel_name, lengthscale, variance, noise, rng) of a small exact GP problem."""
    n = draw(st.integers(2, 10))
    d = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    scale = draw(log_uniform(1e-2, 1e3))
    offset = draw(st.sampled_from([0.0, 0.0, 1e2, 1e5]))
    X = offset + scale * rng.normal(size=(n, d))
    if draw(st.booleans()):  # exact duplicates, as in real tables
        X[-1] = X[0]
    y = np.sin(X[:, 0] / scale) + 0.1 * rng.normal(size=n)
    kernel = draw(st.sampled_from(kernels))
    lengthscale = scale * np.array([draw(log_uniform(1e-1, 1e2)) for _ in range(d)])
    variance = draw(log_uniform(1e-2, 1e2))
    noise = draw(log_uniform(1e-8, 1.0))
    return X, y, kernel, lengthscale, variance, noise, rng


def build_kernel(name: str, lengthscale: np.ndarray, variance: float):
    """A gpexplain kernel of the named family with the given ARD lengthscales."""
    import gpytorch
    import torch

    from gpexplain.kernels import RBF, GPyTorchKernel

    d = len(lengthscale)
    if name == "rbf":
        return RBF(lengthscale=lengthscale, variance=variance)
    if name == "additive":  # orthogonal additive, all orders, under a unit Gaussian measure
        from gpexplain.kernels.measures import Gaussian
        from gpexplain.kernels.orthogonal_additive import OrthogonalAdditive

        return OrthogonalAdditive(lengthscale, np.full(d + 1, variance),
                                  Gaussian(np.zeros(d), lengthscale))
    bases = {
        "gpytorch-rbf": lambda: gpytorch.kernels.RBFKernel(ard_num_dims=d),
        "matern52": lambda: gpytorch.kernels.MaternKernel(nu=2.5, ard_num_dims=d),
        "matern32": lambda: gpytorch.kernels.MaternKernel(nu=1.5, ard_num_dims=d),
        "rq": lambda: gpytorch.kernels.RQKernel(ard_num_dims=d),
        "periodic": lambda: gpytorch.kernels.PeriodicKernel(ard_num_dims=d),
        "linear": lambda: gpytorch.kernels.LinearKernel(),
    }
    base = bases[name]().double()
    if name != "linear":
        base.lengthscale = torch.as_tensor(lengthscale, dtype=torch.float64)
    if name == "periodic":
        base.period_length = torch.as_tensor(3.0 * lengthscale, dtype=torch.float64)
    module = gpytorch.kernels.ScaleKernel(base).double()
    module.outputscale = torch.tensor(variance, dtype=torch.float64)
    return GPyTorchKernel(module)


@st.composite
def queries(draw, X: np.ndarray, lengthscale: np.ndarray):
    """Query points near the data, or far out along a random direction (long paths)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    n_query = draw(st.integers(1, 3))
    reach = draw(st.sampled_from([1.0, 1.0, 1e1, 1e2, 1e3, 1e5]))
    centre = X.mean(axis=0)
    return centre + reach * lengthscale * rng.normal(size=(n_query, X.shape[1]))
