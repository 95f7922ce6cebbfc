"""Random-feature (sparse-spectrum) kernel and its closed-form integrated-gradient functionals.

Bochner's theorem writes a stationary kernel as an expectation over frequencies drawn from its
normalised spectral density; the sparse-spectrum approximation (Lazaro-Gredilla et al. 2010;
Butler et al. 2024, Sec. 3.3) keeps M of them::

    phi(x) = sqrt(variance / M) [cos(V x), sin(V x)]          (2M features)
    k(x, x') = phi(x) . phi(x') = variance / M * sum_m cos(v_m . (x - x'))

For the ARD squared exponential the frequencies are ``v_m ~ N(0, diag(lengthscale)^-2)``
(``RandomFeatureKernel.from_rbf``). The kernel is exactly stationary, ``k(x, x) = variance``,
and it is a finite-rank kernel in its own right, so a GP with it is exact Bayesian linear
regression on ``phi``.

Integrated gradients of one feature (Butler et al. Sec. 4.2 / App. B, as corrected in
docs/errata.md:
``sin`` and ``cos`` entries in their own order, safe as ``v . (x - xt) -> 0``). With
``u = x - xt``, ``delta_m = v_m . u``, ``h = delta_m / 2`` and the path midpoint phase
``c_m = v_m . xt + h``::

    IG_i cos(v_m . x) = u_i v_mi (cos(v_m.x) - cos(v_m.xt)) / delta_m = -u_i v_mi sin(c_m) sinc(h)
    IG_i sin(v_m . x) = u_i v_mi (sin(v_m.x) - sin(v_m.xt)) / delta_m =  u_i v_mi cos(c_m) sinc(h)

using ``sin a - sin b = 2 cos((a+b)/2) sin((a-b)/2)`` and ``cos a - cos b = -2 sin((a+b)/2)
sin((a-b)/2)``, with ``sinc(h) = sin(h)/h`` (1 at h = 0). At ``delta_m = 0`` this is the
docs/errata.md
limit ``u_i v_mi cos(v_m . xt)`` (sin feature); at ``x = xt`` every entry is exactly zero.
Writing ``G[p, i, :]`` for the IG of the feature vector at point p, every functional is a
product with feature vectors:

    cross[p, i, n] = G[p, i, :] . phi(z_n)
    prior[p, i, j] = G[p, i, :] . G[p, j, :]
                   = variance / M * u_i u_j sum_m v_mi v_mj sinc(h_pm)^2

(the phases drop out of the prior term since ``sin^2 + cos^2 = 1``), and the prior term is a
Gram matrix, positive semi-definite by construction. Completeness holds feature by feature:
``sum_i G[p, i, :] = phi(x_p) - phi(xt)`` up to round-off.
"""

from __future__ import annotations

import numpy as np

from gpexplain._torch import as_tensor
from gpexplain.kernels._parameters import as_variance
from gpexplain.kernels.base import Kernel
from gpexplain.kernels.rbf import RBF

__all__ = ["RandomFeatureKernel", "sinc"]


def sinc(h: np.ndarray) -> np.ndarray:
    """Unnormalised ``sin(h) / h``, equal to 1 at ``h = 0``; elementwise, any shape.

    ``sin(h) / h`` is accurate to a few ulps for every nonzero float (``sin`` is, and a
    quotient adds one rounding), so only ``h = 0`` itself needs the limit.
    """
    h = np.asarray(h, dtype=np.float64)
    out = np.ones_like(h)
    nonzero = h != 0
    out[nonzero] = np.sin(h[nonzero]) / h[nonzero]
    return out


class RandomFeatureKernel(Kernel):
    """Sparse-spectrum (random Fourier feature) kernel with fixed frequencies.

    ``k(x, x') = variance / M * sum_m cos(v_m . (x - x'))``, the inner product of the features
    ``phi(x) = sqrt(variance / M) [cos(V x), sin(V x)]`` (all cosines, then all sines).

    Parameters
    ----------
    frequencies : array-like of shape (n_frequencies, n_features)
        The frequency vectors ``v_m`` as rows, in radians per unit of each input. A column of
        zeros switches a feature off (its attributions are exactly zero).
    variance : float, default 1.0
        Positive output variance ``k(x, x)``, in squared units of the target.

    Raises
    ------
    ValueError
        Frequencies not a finite non-empty 2-D array, or a variance that is not positive and
        finite.

    See Also
    --------
    RandomFeatureKernel.from_rbf : draw the frequencies from an ARD-SE spectral density.
    """

    def __init__(self, frequencies, variance: float = 1.0):
        frequencies = np.array(frequencies, dtype=np.float64)
        if frequencies.ndim != 2 or frequencies.shape[0] == 0 or frequencies.shape[1] == 0:
            raise ValueError(
                "frequencies must be a 2-D array (n_frequencies, n_features) with at least one "
                f"row and one column, got shape {frequencies.shape}."
            )
        if not np.all(np.isfinite(frequencies)):
            raise ValueError("frequencies must be finite numbers.")
        self.frequencies = frequencies
        self.variance = as_variance(variance)

    @classmethod
    def from_rbf(
        cls, kernel: RBF, n_frequencies: int, n_features: int | None = None, random_state=0
    ) -> RandomFeatureKernel:
        """Draw ``n_frequencies`` frequencies from the spectral density of an (ARD) SE kernel.

        ``v_m = w_m / lengthscale`` with ``w_m ~ N(0, I)`` (Butler et al. Sec. 3.3:
        ``v_m ~ N(0, diag(l)^-2)``); an infinite lengthscale gives a zero frequency column, so
        the feature is ignored exactly as by the RBF kernel. ``E[k] = kernel`` over the draws.

        Parameters
        ----------
        kernel : gpexplain.kernels.RBF
            Lengthscales (original units) and variance to approximate.
        n_frequencies : int
            M >= 1; the feature map has 2M entries.
        n_features : int, optional
            Needed for an isotropic (scalar-lengthscale) kernel; checked against an ARD one.
        random_state : int or numpy.random.Generator, default 0
            Seed of the standard-normal draws.

        Raises
        ------
        TypeError
            ``kernel`` is not an ``RBF``.
        ValueError
            ``n_frequencies`` not a positive integer, or ``n_features`` missing/mismatched.
        """
        if not isinstance(kernel, RBF):
            raise TypeError(f"kernel must be a gpexplain RBF kernel, got {type(kernel).__name__}.")
        if not isinstance(n_frequencies, int | np.integer) or n_frequencies < 1:
            raise ValueError(f"n_frequencies must be a positive integer, got {n_frequencies!r}.")
        if n_features is None:
            if not kernel.ard:
                raise ValueError("an isotropic RBF kernel needs n_features.")
            n_features = kernel.lengthscale.shape[0]
        lengthscale = kernel._lengthscales(int(n_features))
        rng = np.random.default_rng(random_state)
        standard = rng.standard_normal((int(n_frequencies), int(n_features)))
        return cls(standard / lengthscale, kernel.variance)

    @property
    def n_frequencies(self) -> int:
        return self.frequencies.shape[0]

    @property
    def n_features(self) -> int:
        return self.frequencies.shape[1]

    def __repr__(self) -> str:
        return (
            f"RandomFeatureKernel(n_frequencies={self.n_frequencies}, "
            f"n_features={self.n_features}, variance={self.variance!r})"
        )

    def _check(self, X: np.ndarray, name: str) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(
                f"{name} must have shape (n, {self.n_features}) for this kernel, got {X.shape}."
            )
        return X

    def features(self, X: np.ndarray) -> np.ndarray:
        """Feature map ``phi(X)`` of shape (n, 2 n_frequencies): cosines, then sines."""
        phase = self._check(X, "X") @ self.frequencies.T
        scale = np.sqrt(self.variance / self.n_frequencies)
        return scale * np.concatenate([np.cos(phase), np.sin(phase)], axis=1)

    def __call__(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """Kernel matrix ``phi(X1) phi(X2)^T`` of shape (n1, n2)."""
        return self.features(X1) @ self.features(X2).T

    def diag(self, X: np.ndarray) -> np.ndarray:
        """``k(x, x) = variance`` for each row of X (exactly: ``cos^2 + sin^2 = 1``), shape (n,)."""
        return np.full(self._check(X, "X").shape[0], self.variance)

    def torch_kernel(self, n_features: int):
        """The same kernel as a float64 GPyTorch module, for autograd (quadrature) explanations.

        ``ScaleKernel(RFFKernel)`` with unit lengthscale and ``randn_weights`` set to the
        frequencies: GPyTorch's features ``[cos(x W), sin(x W)] / sqrt(M)`` with ``W = V^T``
        give the identical kernel.

        Raises
        ------
        ValueError
            ``n_features`` differs from the frequencies' dimension.
        """
        import gpytorch

        if n_features != self.n_features:
            raise ValueError(
                f"the kernel has frequencies in {self.n_features} dimensions but the inputs "
                f"have {n_features} features."
            )
        base = gpytorch.kernels.RFFKernel(num_samples=self.n_frequencies).double()
        # RFFKernel draws its frequencies lazily unless the buffer already exists.
        base.register_buffer("randn_weights", as_tensor(self.frequencies.T.copy(), like=base))
        base.lengthscale = as_tensor(np.ones((1, 1)), like=base)
        kernel = gpytorch.kernels.ScaleKernel(base).double()
        kernel.outputscale = as_tensor(self.variance, like=kernel)
        return kernel.eval()

    # -- integrated-gradient functionals --------------------------------------------------
    def _path_terms(self, X: np.ndarray, baseline: np.ndarray):
        """``u = x - xt`` (p, D), midpoint phases ``c`` (p, M) and ``sinc(v.u / 2)`` (p, M)."""
        X = self._check(X, "X")
        baseline = np.asarray(baseline, dtype=np.float64).reshape(-1)
        if baseline.shape[0] != self.n_features:
            raise ValueError(
                f"baseline must have {self.n_features} values, got {baseline.shape[0]}."
            )
        u = X - baseline[None, :]
        # v.(x - xt) from the difference itself, not as v.x - v.xt, which cancels.
        half = 0.5 * (u @ self.frequencies.T)
        phase = (self.frequencies @ baseline)[None, :] + half
        return u, phase, sinc(half)

    def integrated_gradient_features(self, X: np.ndarray, baseline: np.ndarray) -> np.ndarray:
        """IG of the feature map: ``G[p, i, f] = IG_i phi_f`` at ``x_p``, shape (p, D, 2M).

        ``G[p, i, m] = -s u_i v_mi sin(c_pm) sinc(h_pm)`` (cosine features) and ``G[p, i, M + m]
        = s u_i v_mi cos(c_pm) sinc(h_pm)`` (sine features), ``s = sqrt(variance / M)``, with
        ``u``, ``c``, ``h`` as in the module docstring (corrected, docs/errata.md Sec. 4.2).
        ``sum_i G[p, i, :] = phi(x_p) - phi(xt)``.
        """
        u, phase, s = self._path_terms(X, baseline)
        scale = np.sqrt(self.variance / self.n_frequencies)
        ratio = np.concatenate([-np.sin(phase) * s, np.cos(phase) * s], axis=1)  # (p, 2M)
        v = np.concatenate([self.frequencies, self.frequencies], axis=0)  # (2M, D)
        return scale * u[:, :, None] * v.T[None, :, :] * ratio[:, None, :]

    def integrated_gradient_cross(
        self, X: np.ndarray, baseline: np.ndarray, Z: np.ndarray
    ) -> np.ndarray:
        """Cross term ``A[p, i, n] = IG_i k(., z_n)`` at ``x_p`` = ``G[p, i, :] . phi(z_n)``.

        Parameters
        ----------
        X : ndarray of shape (n_points, n_features)
        baseline : ndarray of shape (n_features,)
        Z : ndarray of shape (n_train, n_features)

        Returns
        -------
        ndarray of shape (n_points, n_features, n_train), in the units of the variance;
        ``sum_i A[p, i, n] = k(x_p, z_n) - k(xt, z_n)``.
        """
        return self.integrated_gradient_features(X, baseline) @ self.features(Z).T

    def integrated_gradient_prior(self, X: np.ndarray, baseline: np.ndarray) -> np.ndarray:
        """Same-point prior covariance ``P[p, i, j] = Cov(IG_i f(x_p), IG_j f(x_p))``, f ~ GP(0, k).

        ``P_ij = variance / M * u_i u_j sum_m v_mi v_mj sinc(v_m.u / 2)^2`` with ``u = x - xt``
        (the Gram matrix of the IG feature vectors). ``sum_ij P_ij = 2 variance / M sum_m
        (1 - cos(v_m . u)) = Var[f(x) - f(xt)]``. Shape (n_points, n_features, n_features)
        for X (n_points, n_features) and a baseline (n_features,); symmetric positive
        semi-definite.
        """
        u, _, s = self._path_terms(X, baseline)
        V = self.frequencies
        outer = (V[:, :, None] * V[:, None, :]).reshape(self.n_frequencies, -1)  # (M, D^2)
        weighted = ((s * s) @ outer).reshape(-1, self.n_features, self.n_features)
        P = (self.variance / self.n_frequencies) * u[:, :, None] * u[:, None, :] * weighted
        return 0.5 * (P + np.swapaxes(P, 1, 2))  # exactly symmetric, not just up to round-off

    def integrated_gradient_prior_between(
        self, X1: np.ndarray, baseline1: np.ndarray, X2: np.ndarray, baseline2: np.ndarray,
        n_nodes: int | None = None,
    ) -> np.ndarray:
        """Two-path prior term ``P[p, q, i, j] = G(x_p; xt)[i] . G(x'_q; xt')[j]`` (the IG
        feature vectors of ``integrated_gradient_features``; exact, ``n_nodes`` unused).
        Cost O(n1 n2 D^2 M); shape (n1, n2, n_features, n_features)."""
        G1 = self.integrated_gradient_features(X1, baseline1)
        G2 = self.integrated_gradient_features(X2, baseline2)
        return np.einsum("pif,qjf->pqij", G1, G2)
