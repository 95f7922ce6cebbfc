"""One chunk of query points through the generic formula of DESIGN.md: the unit of work that
the driver (``gpexplain.explain._driver``) runs in this process or on a Dask cluster, and that
independent outputs of a multi-output posterior run once per output
(``gpexplain.explain.multi_output``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gpexplain.functionals.base import LinearFunctional

__all__ = ["ChunkTask", "explain_chunk", "gaussian_moments"]


def gaussian_moments(posterior, cross: np.ndarray, prior: np.ndarray | None):
    """The generic formula: mean ``C a`` and covariance ``P - C Q C^T`` (exactly symmetric).

    Parameters
    ----------
    posterior : gpexplain.posterior.Posterior
    cross : ndarray (n_points, D, n_basis)
    prior : ndarray (n_points, D, D) or None (mean only)

    Returns
    -------
    mean : ndarray (n_points, D)
    cov : ndarray (n_points, D, D) or None
    """
    mean = cross @ posterior.alpha
    if prior is None:
        return mean, None
    cov = prior - posterior.quadratic_form(cross)
    return mean, 0.5 * (cov + np.swapaxes(cov, 1, 2))


class ChunkTask(NamedTuple):
    """What every chunk needs besides its points: shipped to each Dask worker once."""

    posterior: object
    scheme: object
    functional: LinearFunctional
    return_cov: bool


def explain_chunk(block: np.ndarray, task: ChunkTask) -> tuple:
    """Per block: (mean, cov, prediction, reference per row, difference variance)."""
    posterior, scheme, functional, return_cov = task
    prediction = posterior.mean + scheme.kernel_matrix(block) @ posterior.alpha
    # One code path for the mean, ``C a`` from the same cross term with or without the
    # covariance: a separate mean-only contraction rounded differently, and an
    # ill-conditioned posterior (|a| ~ 1e10) turned that into different means (issue 10,
    # class 5); ``C a`` also completes term by term, since the rows of C sum to
    # k(x, Z) - k(xt, Z).
    if return_cov:
        mean, cov = gaussian_moments(posterior, *scheme.cross_and_prior(block))
    else:
        mean, cov = gaussian_moments(posterior, scheme.cross(block), None)
    weights = functional.output_weights(block)
    if weights is not None:
        mean = weights * mean
        cov = None if cov is None else weights[:, :, None] * cov * weights[:, None, :]
    reference, difference_variance = functional.completeness_target(
        posterior, block, return_cov
    )
    # The reference value does not depend on the block; carried per row to fit the chunks.
    reference = None if reference is None else np.full(len(block), reference)
    return mean, cov, prediction, reference, difference_variance
