"""Linear functionals of a GP, and the schemes that evaluate them on a kernel.

An explanation of a GP at a point x is a vector ``L f = (L_1 f, ..., L_D f)`` of linear
functionals of the latent function f (a gradient, an integrated gradient, a Shapley value, a
local linear weight). Under a posterior in representer form (``gpexplain.posterior``) it is
Gaussian with

    E[L f]          = L m0 + (L k(., Z)) a               (L m0 = 0 for every functional here)
    Cov[L f, L f]   = L L' k - (L k(., Z)) Q (L k(., Z))^T

so a functional only has to say how to apply L to the kernel: the **cross term**
``L_i k(., z_n)`` (n_points, D, n_basis) and the **prior term** ``L_i L_j' k`` (n_points, D, D).

Two classes split what from how:

* ``LinearFunctional``: *what* is computed (e.g. ``IntegratedGradient(baselines, rule,
  n_steps)``), independent of the kernel, plus its completeness target;
* ``Scheme``: *how* it is evaluated on one kernel type (a closed form, or quadrature with
  autograd over a GPyTorch kernel), chosen once by ``LinearFunctional.bind(kernel, Z)`` from a
  registry keyed by kernel type (the most specific registered base class of the kernel wins).
  A registration may also be a factory ``(functional, kernel, Z) -> Scheme`` that picks among
  several scheme classes once (e.g. graded quadrature for stationary GPyTorch kernels, plain
  quadrature for the others).

The explanation driver (``gpexplain.explain._driver.explain``) calls, per chunk of query
points, ``kernel_matrix`` (for the prediction), ``cross_and_prior`` (or ``cross`` without a
covariance; the mean is ``cross @ a`` either way, so that both calls return the same mean),
``output_weights`` and ``completeness_target``. ``cross_and_prior`` must return the same
cross term as ``cross``, bit for bit. The covariance across points (``return_cov="points"``,
``gpexplain.explain._points``) also asks for the **two-point prior term** ``prior_between(X1,
X2)`` = ``L_i(x_p) L_j'(x'_q) k`` (n1, n2, D, D), equal to ``prior`` where ``x_p = x'_q``;
a scheme without it refuses by name (``NotImplementedError``).

Adding a closed form for a new kernel: its math in the kernel's own file, one
``@SomeFunctional.register(NewKernel)`` scheme. Adding a functional: its own module here and one
thin public wrapper in ``gpexplain.explain`` calling the driver.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar

import numpy as np

__all__ = ["LinearFunctional", "Scheme", "refuse"]


class Scheme(ABC):
    """One linear functional evaluated on one kernel against fixed basis points Z (abstract).

    Parameters
    ----------
    functional : LinearFunctional
        The specification (baselines, quadrature settings, ...).
    kernel : gpexplain.kernels.base.Kernel
    Z : ndarray (n_basis, n_features)
        The posterior's basis points (training inputs or inducing points).
    """

    #: Short description of how the functional is evaluated, e.g. "closed form".
    label: str = ""

    def __init__(self, functional: LinearFunctional, kernel, Z: np.ndarray):
        self.functional, self.kernel, self.Z = functional, kernel, Z

    @abstractmethod
    def cross(self, X: np.ndarray) -> np.ndarray:
        """Cross term ``C[p, i, n] = L_i k(., z_n)`` at each point, shape (n_points, D, n_basis)."""

    @abstractmethod
    def prior(self, X: np.ndarray) -> np.ndarray:
        """Prior term ``P[p, i, j] = L_i L_j' k`` at each point, shape (n_points, D, D)."""

    def cross_and_prior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Both terms; schemes that share work between them override this."""
        return self.cross(X), self.prior(X)

    def prior_between(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """Two-point prior term ``P[p, q, i, j] = L_i(x_p) L_j'(x'_q) k``, (n1, n2, D, D).

        What the covariance across explained points needs (``return_cov="points"``); equal to
        ``prior`` on the diagonal ``x_p = x'_q``. Schemes without it refuse by name.

        Raises
        ------
        NotImplementedError
            The scheme has no two-point prior term yet.
        """
        raise NotImplementedError(
            f"the covariance across points (return_cov='points') is not yet supported for "
            f"{self.functional.name or type(self.functional).__name__} evaluated by "
            f"{type(self).__name__} on kernel {self.kernel!r}; use return_cov=True (per-point "
            "covariance) or a kernel with a two-point prior term (gx.kernels.RBF)."
        )

    def point_pair_seconds(self) -> float:
        """Seconds ``prior_between`` is estimated to take per pair of points (0: closed forms,
        never slow enough to price)."""
        return 0.0

    def copies_per_point(self) -> int:
        """(n_basis, n_features) float64 slabs one point needs at once (for chunking)."""
        return 1

    def kernel_matrix(self, X: np.ndarray) -> np.ndarray:
        """``k(X, Z)`` (n_points, n_basis), for the prediction; schemes that compute it from
        the same intermediate results as the cross term override this."""
        return self.kernel(X, self.Z)


def refuse(functional: LinearFunctional, kernel, Z: np.ndarray) -> Scheme:
    """Scheme factory registered for a kernel type that must not inherit a generic scheme of
    its base class (e.g. a kernel with a white-noise part, whose paths have no derivative):
    ``bind`` then raises the functional's ``TypeError`` for unsupported kernels."""
    raise TypeError(functional.unsupported_kernel_message(kernel))


class LinearFunctional(ABC):
    """A vector of D linear functionals of f at each query point (abstract).

    Subclasses describe *what* is computed and register a ``Scheme`` per kernel type with
    ``@TheFunctional.register(KernelType)``.

    Attributes
    ----------
    name : str
        What the explanation is called in ``Attribution.method``, e.g. "integrated gradients".
    baseline : ndarray or None
        The reference point(s) reported in ``Attribution.baseline``.
    complete : bool
        True when the completeness target holds exactly (the driver then measures it on
        every result and warns beyond ``gpexplain.accuracy.COMPLETENESS_RTOL``); False for
        approximations such as gradient x input.
    """

    name: ClassVar[str] = ""
    complete: ClassVar[bool] = True
    _schemes: ClassVar[dict[type, Callable[..., Scheme]]]
    baseline: np.ndarray | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._schemes = {}

    @classmethod
    def register(cls, kernel_type: type):
        """Decorator: ``scheme`` evaluates this functional on ``kernel_type`` (and subclasses
        without a registration of their own).

        ``scheme`` is a ``Scheme`` subclass, or a factory with the same call signature
        ``(functional, kernel, Z) -> Scheme``.
        """

        def decorator(scheme: Callable[..., Scheme]) -> Callable[..., Scheme]:
            cls._schemes[kernel_type] = scheme
            return scheme

        return decorator

    @classmethod
    def supported_kernels(cls) -> list[str]:
        return sorted(
            kernel_type.__name__ for kernel_type, scheme in cls._schemes.items()
            if scheme is not refuse
        )

    def scheme_for(self, kernel) -> Callable[..., Scheme] | None:
        """The registered scheme (class or factory) for ``kernel``'s type, or None."""
        for klass in type(kernel).__mro__:
            if klass in self._schemes:
                return self._schemes[klass]
        return None

    def bind(self, kernel, Z: np.ndarray) -> Scheme:
        """The scheme evaluating this functional on ``kernel`` with basis points Z.

        Raises
        ------
        TypeError
            No scheme is registered for the kernel's type; the message lists those that are
            (and starts with the kernel's ``explanation_hint`` where it has one).
        """
        scheme = self.scheme_for(kernel)
        if scheme is None:
            message = self.unsupported_kernel_message(kernel)
            hint = getattr(kernel, "explanation_hint", "")
            raise TypeError(message if hint in message else f"{hint} {message}")
        return scheme(self, kernel, Z)

    def unsupported_kernel_message(self, kernel) -> str:
        """The ``TypeError`` message of ``bind`` for a kernel without a scheme."""
        message = (
            f"{self.name or type(self).__name__} is not available for kernel {kernel!r}; "
            f"supported kernel types: {', '.join(self.supported_kernels())}."
        )
        hint = getattr(kernel, "explanation_hint", "")
        return f"{hint} {message}" if hint else message

    def output_weights(self, X: np.ndarray) -> np.ndarray | None:
        """Per-point weights ``w`` (n_points, D) when the functional is ``w_i L0_i`` with
        ``L0`` what the schemes evaluate (gradient x input: ``w = x``); None otherwise.

        The driver applies them to the moments after the generic formula (mean ``w_i m_i``,
        covariance ``w_i w_j C_ij``), the same on the mean-only path.
        """
        return None

    def completeness_target(self, posterior, X: np.ndarray, return_var: bool):
        """What the attributions must sum to: ``(baseline_prediction, difference_variance)``.

        ``baseline_prediction`` (float or None) is the value the means complete to
        (``mean.sum(1) == prediction - baseline_prediction``); ``difference_variance``
        ((n_points,) or None; None when ``return_var`` is False) what ``cov.sum((1, 2))``
        must equal. ``(None, None)`` for functionals without completeness (gradients).

        The driver calls this once per chunk of query points X (memory stays bounded), so
        ``baseline_prediction`` must not depend on X.
        """
        return None, None

    def output_names(self, posterior) -> list[str]:
        """Names of the D explained quantities (``Attribution.feature_names``): by default the
        posterior's features."""
        return list(posterior.feature_names)

    def explained_inputs(self, X: np.ndarray) -> np.ndarray:
        """The (n_points, D) values reported as ``Attribution.X``: by default the query."""
        return X

    def describe(self, scheme: Scheme) -> str:
        """``Attribution.method`` for a result computed with ``scheme``."""
        return f"{self.name} ({scheme.label})" if scheme.label else self.name
