"""The generic formula: posterior mean and covariance of a linear functional of f.

For a linear functional L (one per feature, per point) of f ~ posterior in representer form,

    E[L f]   = (L k(., Z)) a                         (the constant prior mean has L m0 = 0
                                                      for derivative-based functionals)
    Cov[L f] = L L' k - (L k(., Z)) Q (L k(., Z))^T

The kernel supplies the cross term ``L k(., Z)`` and the prior term ``L L' k``; the posterior
supplies ``a`` and the quadratic form of ``Q`` (for the exact GP a sum of squares, so the
variances cannot go negative through cancellation beyond round-off).
"""

from __future__ import annotations

import numpy as np

__all__ = ["functional_posterior"]


def functional_posterior(
    posterior, cross: np.ndarray, prior: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Combine kernel functionals with a posterior.

    Parameters
    ----------
    posterior : gpexplain.posterior.Posterior
    cross : ndarray (n_points, n_features, n_train)
        ``L_i k(., z_n)`` at each point.
    prior : ndarray (n_points, n_features, n_features) or None
        ``L_i L_j' k`` at each point; None to skip the covariance.

    Returns
    -------
    mean : ndarray (n_points, n_features)
    cov : ndarray (n_points, n_features, n_features) or None, exactly symmetric.
    """
    mean = cross @ posterior.alpha
    if prior is None:
        return mean, None
    cov = prior - posterior.quadratic_form(cross)
    return mean, 0.5 * (cov + np.swapaxes(cov, 1, 2))
