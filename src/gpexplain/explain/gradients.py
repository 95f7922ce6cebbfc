"""Gradient explanations of GP regression with uncertainty: the posterior derivative process.

Seitz, *Gradient-based explanations for Gaussian process regression and classification
models* (2022), Sec. 4, eqs. 15-20: the input gradient of f is a linear functional of f, so
under the GP posterior it is Gaussian, with

    E[d_i f(x)]               = d_i m(x)  = (d_i k(x, Z)) a
    Cov[d_i f(x), d_j f(x)]   = d_i d'_j k(x, x') |_{x'=x}  -  (d_i k(x, Z)) Q (d_j k(x, Z))^T

(the generic formula of ``gpexplain.explain._gaussian_functional``). As corrected in ERRATA,
the prior term is the derivative kernel, not k, and the cross term is the derivative in the
query argument. The kernel pieces come from ``gpexplain.kernels.derivatives``.

Two different quantities are easy to confuse, and only the first is computed here:

* the **posterior covariance of the gradient** ``Cov[grad f(x)]`` (how sure the model is
  about each partial derivative), and
* the **gradient of the predictive variance** ``d/dx Var[f(x)]`` (how the uncertainty about
  the prediction changes as x moves), which is not an attribution and is not returned.
"""

from __future__ import annotations

import numpy as np

from gpexplain._validation import check_finite_result
from gpexplain.attribution import Attribution
from gpexplain.explain._gaussian_functional import functional_posterior
from gpexplain.explain._mixture import explains_mixtures
from gpexplain.explain.integrated_gradients import resolve_baseline
from gpexplain.kernels.derivatives import gradient_cross, gradient_prior
from gpexplain.parallel import default_chunk_size, map_chunks
from gpexplain.posterior import as_posterior

__all__ = ["gradients"]


@explains_mixtures
def gradients(
    model_or_posterior,
    X,
    *,
    gradient_x_input: bool = False,
    baseline=None,
    return_cov: bool = True,
    chunk_size: int | None = None,
) -> Attribution:
    """Posterior of the input gradient of a GP regression model, with its full covariance.

    For each query point x this returns the Gaussian posterior of the gradient of the latent
    function, ``grad f(x) | data`` (Seitz 2022, eq. 20, with the ERRATA corrections):

        mean[p, i]   = d/dx_i m(x_p)
        cov[p, i, j] = Cov[d_i f(x_p), d_j f(x_p)]
                     = d_i d'_j k(x_p, x_p) - (d_i k(x_p, Z)) Q (d_j k(x_p, Z))^T

    ``cov`` is the **posterior covariance of the gradient process**: the uncertainty about each
    partial derivative. It is *not* the gradient of the predictive variance
    ``d/dx Var[f(x)]``, a different quantity that this function does not compute.

    With ``gradient_x_input=True`` the attribution is gradient x input (Shrikumar et al. 2016;
    Seitz 2022, eq. 10), ``x_i d_i f(x)``, again Gaussian, with mean ``x_i mean_i`` and
    covariance ``x_i x_j cov_ij``. Given a ``baseline`` xt it is ``(x_i - xt_i) d_i f(x)``, the
    first-order Taylor estimate of ``f(x) - f(xt)``.

    The kernel pieces are closed forms for ``gx.kernels.RBF`` and otherwise come from
    ``gpexplain.kernels.derivatives``: the cross term by autograd, the derivative kernel at
    coinciding points analytically, for the GPyTorch kernels listed in
    ``gpexplain.kernels.derivatives.SUPPORTED_KERNELS`` (RBF, Matern 3/2 and 5/2, rational
    quadratic, periodic, random Fourier features, linear, constant, and scaled, summed and
    multiplied combinations of them).

    Parameters
    ----------
    model_or_posterior : fitted estimator (e.g. ``GPRegressor``) or any ``Posterior``
        (exact, sparse variational, random-feature).
    X : array-like of shape (n_points, n_features)
        Points to explain, in the original units (NumPy, pandas or torch).
    gradient_x_input : bool, default False
        Return gradient x input (an attribution in units of y) instead of the gradient (units
        of y per unit of each feature).
    baseline : {"mean", "median", "zeros"} or array-like of shape (n_features,), optional
        Only with ``gradient_x_input=True``: multiply the gradient by ``x - baseline`` instead
        of x. The default (None) is the plain ``x * gradient`` of the literature.
    return_cov : bool, default True
        Compute the (n_points, n_features, n_features) covariance; False returns the mean only,
        with ``cov=None``.
    chunk_size : int, optional
        Points processed at once (bounds memory); chosen automatically by default.

    Returns
    -------
    Attribution
        ``mean`` (n_points, n_features), ``cov`` (n_points, n_features, n_features) or None;
        ``prediction`` is the latent posterior mean at X. ``difference_variance`` is None:
        gradients do not satisfy completeness. ``baseline`` and ``baseline_prediction`` are
        None, except for gradient x input with a baseline, where ``completeness_gap()["mean"]``
        then reports the error of the first-order Taylor estimate.
        ``method`` says which quantity it is: ``"posterior gradient (derivative process)"``,
        ``"gradient x input (derivative process)"`` or
        ``"(x - baseline) x gradient (derivative process)"``.

    Raises
    ------
    ValueError
        Bad query (wrong number of features, NaN/inf, DataFrame columns that do not match),
        a baseline given without ``gradient_x_input=True``, a bad baseline or ``chunk_size``,
        or a kernel without a derivative process (Matern 1/2) or of an unsupported type (the
        message lists the supported kernels).
    TypeError
        ``model_or_posterior`` is neither a fitted estimator nor a posterior.
    FloatingPointError
        A non-finite result (an ill-conditioned posterior); never returned silently.
    """
    posterior = as_posterior(model_or_posterior)
    X = posterior.check_inputs(X)
    names = posterior.feature_names
    if baseline is not None and not gradient_x_input:
        raise ValueError(
            "baseline applies only to gradient x input; pass gradient_x_input=True, or drop "
            "baseline for plain gradients (which have no reference point)."
        )
    xt = None if baseline is None else resolve_baseline(baseline, posterior.data_inputs, names)
    Z, kernel = posterior.train_inputs, posterior.kernel

    def explain_block(block):
        cross = gradient_cross(kernel, block, Z)
        prior = gradient_prior(kernel, block) if return_cov else None
        return functional_posterior(posterior, cross, prior)

    if chunk_size is None:
        chunk_size = default_chunk_size(*Z.shape)
    elif not isinstance(chunk_size, int | np.integer) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer or None, got {chunk_size!r}.")
    mean, cov = map_chunks(explain_block, X, chunk_size)

    label = "posterior gradient (derivative process)"
    baseline_prediction = None
    if gradient_x_input:
        factor = X if xt is None else X - xt[None, :]
        mean = factor * mean
        if cov is not None:
            cov = factor[:, :, None] * cov * factor[:, None, :]
        if xt is None:
            label = "gradient x input (derivative process)"
        else:
            label = "(x - baseline) x gradient (derivative process)"
            baseline_prediction = float(posterior.predict_mean(xt[None, :])[0])
    check_finite_result("gradients", mean, cov)
    return Attribution(
        mean=mean,
        cov=cov,
        X=X,
        prediction=posterior.predict_mean(X),
        baseline=xt,
        baseline_prediction=baseline_prediction,
        feature_names=list(names),
        method=label,
        difference_variance=None,
    )
