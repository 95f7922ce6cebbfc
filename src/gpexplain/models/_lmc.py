"""Fitting a linear model of coregionalisation (LMC) to a 2-D y (``GPRegressor(multi_output=
"lmc")``, issue 24).

Model (Journel and Huijbregts 1978; Goovaerts 1997; Alvarez, Rosasco and Lawrence,
*Kernels for vector-valued functions: a review*, 2012, Sec. 4.2), on standardised inputs and
per-column standardised targets:

    Cov[f_i(x), f_j(x')] = sum_q B^q_ij k_q(x, x'),   q = 1 .. Q,
    k_q = ARD squared exponential (variance 1, its own lengthscales),
    B^q = W_q W_q^T + diag(v_q)   (W_q: t x r),
    y_ni = f_i(x_n) + eps_ni,   eps_ni ~ N(0, noise_i)   (every output observed at every row)

The exact log marginal likelihood of the n t observations, ``K = sum_q B^q kron k_q(X, X) +
diag(noise)``, is maximised over every term's (log lengthscales, W_q, log v_q) and the log
noises by torch's L-BFGS (strong Wolfe) in float64, in two stages from one start:

1. the ICM (``models._icm``, term 1 alone, from its start);
2. all Q terms, term 1 from the ICM's optimum and term q > 1 with lengthscales the ICM's
   times 1/3, 3, 1/9, 9, ... (clipped to the box), W_q of seeded N(0, 0.3^2) entries and
   v_q = 0.05: a second process on another length scale.

The log lengthscales and log noises stay in the single-output fit's box
(``_se_likelihood.LOG_BOUNDS``) as for the ICM. The result in the original units is an
``LMCPosterior`` with ``B^q_orig = S B^q S``, lengthscales times the column scales of X,
noise ``noise_i s_i^2`` and means the column means.
"""

from __future__ import annotations

import numpy as np
import torch

from gpexplain.kernels import RBF
from gpexplain.models._icm import Standardised, Term, _bounded
from gpexplain.models._se_likelihood import LOG_BOUNDS
from gpexplain.posterior.lmc import LMCPosterior

__all__ = ["fit_lmc"]


def fit_lmc(X: np.ndarray, Y: np.ndarray, names, output_names, max_iter: int,
            n_components: int, rank: int | None = None, random_state: int = 0):
    """Fit the LMC of the module docstring; return ``(posterior, log marginal likelihood,
    log marginal likelihood of the ICM of stage 1)``.

    Parameters
    ----------
    X, Y, names, output_names, max_iter
        As ``models._icm.fit_icm`` (``max_iter`` per stage).
    n_components : int
        Q >= 1 terms (1: the ICM).
    rank : int, optional
        Columns of each W_q (default t).
    random_state : int
        Seed of the new terms' W_q.

    Raises
    ------
    ValueError
        Fewer than 2 outputs (from ``Standardised``).
    """
    data = Standardised(X, Y, "an LMC")
    first = data.first_term(rank)
    icm_lml = data.maximise([first], max_iter)
    terms = [first]
    if n_components > 1:
        rng = np.random.default_rng(random_state)
        with torch.no_grad():
            log_lengthscale = _bounded(first.raw_lengthscale, "lengthscale").numpy()
        low, high = LOG_BOUNDS["lengthscale"]
        columns = data.t if rank is None else rank
        for q in range(1, n_components):
            factor = 3.0 ** ((q + 1) // 2) * (-1 if q % 2 else 1)  # -3, +3, -9, +9, ...
            shifted = log_lengthscale + np.sign(factor) * np.log(abs(factor))
            margin = 1e-3 * (high - low)
            terms.append(Term(np.clip(shifted, low + margin, high - margin),
                              0.3 * rng.standard_normal((data.t, columns)),
                              np.full(data.t, np.log(0.05))))
        lml = data.maximise(terms, max_iter)
    else:
        lml = icm_lml
    kernels, matrices = [], []
    with torch.no_grad():
        for term in terms:
            B, lengthscale = data.term_in_units(term)
            kernels.append(RBF(lengthscale, 1.0))
            matrices.append(B)
    posterior = LMCPosterior(
        data.augmented_inputs(), data.tasks, data.augmented_targets(), kernels, matrices,
        data.noise_in_units(), mean=data.y_mean, output_names=output_names,
        feature_names=names,
    )
    return posterior, lml, icm_lml
