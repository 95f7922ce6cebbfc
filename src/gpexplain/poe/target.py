"""What POE explains: f and its gradient, from a torch function, user callables or a GP model.

POE and its baselines need ``f(x)`` and ``grad f(x)`` at arbitrary points (SmoothGrad and
LIME query perturbed points). A *target* supplies both, from

* a gpexplain GP model or posterior: the posterior mean ``m(x)`` and its exact gradient
  (``gx.gradients(model, X, return_cov=False)``, Seitz 2022);
* a callable on torch tensors ``f(X: (n, D) float64) -> (n,)``: gradients by autograd;
* a pair ``(f, grad_f)`` of NumPy callables: user-supplied gradients.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpexplain._torch import as_tensor, to_numpy
from gpexplain._validation import as_feature_matrix, check_finite_result
from gpexplain.explain import gradients as gp_gradients
from gpexplain.posterior import as_posterior

__all__ = ["Target", "as_target", "gradients_and_values"]


@dataclass(frozen=True)
class Target:
    """``values(X) -> (n,)`` and ``gradients(X) -> (n, D)`` of the explained function.

    ``values`` may be None for a gradient-only target (inductive POE needs only gradients).
    """

    values: Callable[[np.ndarray], np.ndarray] | None
    gradients: Callable[[np.ndarray], np.ndarray]
    description: str = "user-supplied"


def _checked(name: str, function, X: np.ndarray, shape: tuple) -> np.ndarray:
    result = np.asarray(to_numpy(function(X)), dtype=np.float64)
    if result.shape != shape and result.size == int(np.prod(shape)):
        result = result.reshape(shape)
    if result.shape != shape:
        raise ValueError(
            f"{name} returned shape {result.shape} for {X.shape[0]} points; {shape} expected."
        )
    check_finite_result(name, result)
    return result


def _torch_target(function) -> Target:
    import torch

    # A torch.nn.Module gets its inputs on its own device; any other callable on the CPU.
    like = function if isinstance(function, torch.nn.Module) else None

    def values(X):
        with torch.no_grad():
            return function(as_tensor(X, like=like, dtype=torch.float64))

    def gradients(X):
        inputs = as_tensor(X, like=like, dtype=torch.float64).clone().requires_grad_(True)
        output = function(inputs)
        if output.shape != (X.shape[0],):
            raise ValueError(
                f"the torch function returned shape {tuple(output.shape)} for {X.shape[0]} "
                f"points; ({X.shape[0]},) expected (one value per row)."
            )
        (gradient,) = torch.autograd.grad(output.sum(), inputs)
        return to_numpy(gradient)

    return Target(values, gradients, "torch function (autograd gradients)")


def as_target(f) -> Target:
    """A ``Target`` from a GP model/posterior, a torch callable, or ``(f, grad_f)``.

    Raises
    ------
    TypeError
        Anything else (the accepted forms are listed in the message).
    """
    if isinstance(f, Target):
        return f
    if isinstance(f, tuple) and len(f) == 2 and all(callable(part) for part in f):
        return Target(f[0], f[1], "user-supplied function and gradient")
    if hasattr(f, "posterior_") or type(f).__module__.startswith("gpexplain.posterior"):
        posterior = as_posterior(f)
        return Target(
            posterior.predict_mean,
            lambda X: gp_gradients(f, X, return_cov=False).mean,
            f"posterior mean of {type(f).__name__}",
        )
    if callable(f):
        return _torch_target(f)
    raise TypeError(
        "f must be a fitted gpexplain GP model or posterior, a callable on torch tensors "
        "(n, D) -> (n,), or a pair (f, grad_f) of NumPy callables; got "
        f"{type(f).__name__}."
    )


def evaluate(target: Target, X: np.ndarray, what: str) -> np.ndarray:
    """``target.values`` (what="values") or ``target.gradients`` at X, shape-checked, finite."""
    if what == "values":
        if target.values is None:
            raise ValueError(f"the target ({target.description}) has no function values.")
        return _checked(f"f ({target.description})", target.values, X, (X.shape[0],))
    return _checked(f"grad f ({target.description})", target.gradients, X, X.shape)


def gradients_and_values(f, X) -> tuple[np.ndarray, np.ndarray]:
    """``grad f(X)`` (n, D) and ``f(X)`` (n,) of a GP model, torch callable or ``(f, grad_f)``.

    For a gpexplain GP model these are the posterior mean's gradient and value (Seitz 2022).

    Raises
    ------
    TypeError, ValueError
        An unsupported ``f``, bad X, or callables returning the wrong shape.
    FloatingPointError
        A non-finite gradient or value.
    """
    X, _ = as_feature_matrix(X, "X")
    target = as_target(f)
    return evaluate(target, X, "gradients"), evaluate(target, X, "values")
