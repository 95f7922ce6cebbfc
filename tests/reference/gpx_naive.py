"""Naive GPX (Yoshikawa and Iwata) straight from the paper's main-text eqs. 10-18.

Explicit block matrices of order n*d, column-major ``vec`` (the paper's convention), explicit
inverses: slow, but a line-by-line transcription that is easy to check against the paper.
Nothing from ``gpexplain`` is used. Kernel convention::

    k(x, x') = variance * exp(-0.5 * sum_i (x_i - x'_i)^2 / lengthscale_i^2)

Main text, with ``K_bar = I_d (x) K`` (block diagonal), ``L = K_bar + sw2 I_nd`` and
``Z_bar = (diag(Z[:, 0]), ..., diag(Z[:, d-1]))`` (n x nd, eq. 11)::

    C      = sy2 I_n + Z_bar L Z_bar^T                                       (eq. 13)
    y*     ~ N(c*^T C^{-1} y, c** - c*^T C^{-1} c*)                          (eq. 14)
    vec(W) | D ~ N(sy2^{-1} S Z_bar^T y, S),  S = L - L Z_bar^T C^{-1} Z_bar L  (eq. 17)
    w*     ~ N(sy2^{-1} A S Z_bar^T y, c_bar** - A k_bar* + A S A^T),
             A = k_bar*^T L^{-1}                                             (eq. 18)
"""

from __future__ import annotations

import numpy as np


def se_kernel(X1, X2, lengthscale, variance):
    """Squared-exponential kernel matrix by an explicit double loop."""
    X1, X2 = np.atleast_2d(X1), np.atleast_2d(X2)
    lengthscale = np.broadcast_to(np.asarray(lengthscale, float), (X1.shape[1],))
    K = np.empty((X1.shape[0], X2.shape[0]))
    for i in range(X1.shape[0]):
        for j in range(X2.shape[0]):
            K[i, j] = variance * np.exp(-0.5 * np.sum(((X1[i] - X2[j]) / lengthscale) ** 2))
    return K


def gpx_naive(X, Z, y, X_query, Z_query, lengthscale, variance, weight_noise, noise):
    """Every GPX quantity by the paper's block formulas.

    Returns
    -------
    dict with ``log_marginal_likelihood`` (float), ``y_mean`` (m,), ``y_var`` (m,) (eq. 14:
    includes ``noise``), ``w_mean`` (m, d), ``w_cov`` (m, d, d).
    """
    n, d = Z.shape
    K = se_kernel(X, X, lengthscale, variance)
    K_bar = np.kron(np.eye(d), K)  # block col of vec(W) (column-major) is W[:, col]
    L = K_bar + weight_noise * np.eye(n * d)
    Z_bar = np.hstack([np.diag(Z[:, col]) for col in range(d)])
    C = noise * np.eye(n) + Z_bar @ L @ Z_bar.T
    C_inv = np.linalg.inv(C)
    sign, logdet = np.linalg.slogdet(C)
    assert sign > 0
    lml = -0.5 * y @ C_inv @ y - 0.5 * logdet - 0.5 * n * np.log(2 * np.pi)

    S = L - L @ Z_bar.T @ C_inv @ Z_bar @ L
    L_inv = np.linalg.inv(L)
    y_mean, y_var, w_mean, w_cov = [], [], [], []
    for x_star, z_star in zip(X_query, Z_query, strict=True):
        k_star = se_kernel(x_star, X, lengthscale, variance)[0]
        k_starstar = se_kernel(x_star, x_star, lengthscale, variance)[0, 0]
        c_star = np.array([k_star[i] * z_star @ Z[i] for i in range(n)])
        c_starstar = noise + (k_starstar + weight_noise) * z_star @ z_star
        y_mean.append(c_star @ C_inv @ y)
        y_var.append(c_starstar - c_star @ C_inv @ c_star)

        k_bar = np.zeros((n * d, d))
        for col in range(d):
            k_bar[col * n : (col + 1) * n, col] = k_star
        c_bar = (k_starstar + weight_noise) * np.eye(d)
        A = k_bar.T @ L_inv
        w_mean.append(A @ S @ Z_bar.T @ y / noise)
        w_cov.append(c_bar - A @ k_bar + A @ S @ A.T)
    return {
        "log_marginal_likelihood": float(lml),
        "y_mean": np.array(y_mean),
        "y_var": np.array(y_var),
        "w_mean": np.array(w_mean),
        "w_cov": np.array(w_cov),
    }


def gpx_weights_mpmath(X, Z, y, X_query, lengthscale, variance, weight_noise, noise, dps=50):
    """E[w*] and Cov[w*] at ``dps`` digits, for ill-conditioned problems.

    The block formulas above invert L = K_bar + weight_noise I explicitly, so with a tiny
    weight noise they lose digits in float64. This evaluates the equivalent n x n forms
    (``docs/errata.md``, GPX; equal to eq. 18 because A S A^T = k*^T L^{-1} k* - B^T C^{-1} B)
    in mpmath: E[w*] = Z^T (k* o C^{-1} y), Cov[w*] = (k** + weight_noise) I - B^T C^{-1} B
    with B = diag(k*) Z. Inputs are converted exactly from float64.

    Returns
    -------
    w_mean : ndarray (m, d), w_cov : ndarray (m, d, d), rounded to float64
    """
    import mpmath

    with mpmath.workdps(dps):
        n, d = Z.shape
        ell = np.broadcast_to(np.asarray(lengthscale, float), (X.shape[1],))

        def k(a, b):
            return mpmath.mpf(variance) * mpmath.exp(
                -sum(((mpmath.mpf(a[i]) - mpmath.mpf(b[i])) / mpmath.mpf(ell[i])) ** 2
                     for i in range(len(a))) / 2
            )

        C = mpmath.matrix(n, n)
        for i in range(n):
            for j in range(n):
                zz = sum(mpmath.mpf(Z[i, col]) * mpmath.mpf(Z[j, col]) for col in range(d))
                C[i, j] = (k(X[i], X[j]) + (weight_noise if i == j else 0)) * zz
            C[i, i] += noise
        alpha = mpmath.lu_solve(C, mpmath.matrix([mpmath.mpf(v) for v in y]))
        means, covs = [], []
        for x_star in X_query:
            B = mpmath.matrix(n, d)
            for i in range(n):
                k_i = k(x_star, X[i])
                for col in range(d):
                    B[i, col] = k_i * mpmath.mpf(Z[i, col])
            means.append([float(sum(B[i, col] * alpha[i] for i in range(n))) for col in range(d)])
            solved = mpmath.matrix(n, d)
            for col in range(d):
                column = mpmath.lu_solve(C, B.column(col))
                for i in range(n):
                    solved[i, col] = column[i]
            reduction = B.T * solved
            prior = k(x_star, x_star) + weight_noise
            covs.append(
                [[float((prior if a == b else 0) - reduction[a, b]) for b in range(d)]
                 for a in range(d)]
            )
    return np.array(means), np.array(covs)
