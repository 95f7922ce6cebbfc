"""Fuzz cases over the public API; each draws a problem and returns an ``Outcome``.

Used by ``test_public_api.py`` (which asserts every outcome is ``ok``) and by
``campaign.py`` (which counts outcomes per class over many examples).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import strategies as st

import gpexplain as gx
from tests.fuzz.file_cases import FILE_CASES
from tests.fuzz.harness import (
    Outcome,
    call,
    check_attribution,
    check_same_mean,
    classify_exception,
    guarded,
)
from tests.fuzz.poe_cases import POE_CASES
from tests.fuzz.strategies import (
    GRADIENT_KERNELS,
    build_kernel,
    log_uniform,
    problems,
    queries,
)


def _posterior(data, kernels=None):
    X, y, name, lengthscale, variance, noise, _ = data.draw(
        problems() if kernels is None else problems(kernels)
    )
    posterior, error, _ = call(
        gx.ExactPosterior, X, y, kernel=build_kernel(name, lengthscale, variance), noise=noise
    )
    return X, lengthscale, name, posterior, error


@guarded
def integrated_gradients_case(data) -> Outcome:
    X, lengthscale, name, posterior, error = _posterior(data)
    if error is not None:
        return classify_exception(error, ("noise", "kernel", "X", "y"))
    Xq = data.draw(queries(X, lengthscale))
    n_baselines = data.draw(st.sampled_from([1, 1, 2]))
    baselines = data.draw(queries(X, lengthscale))[:n_baselines]
    rule = data.draw(st.sampled_from(["gauss-legendre", "gauss-legendre", "simpson"]))
    kwargs = dict(baseline=baselines if n_baselines > 1 else baselines[0], rule=rule)
    full, error, warned = call(gx.integrated_gradients, posterior, Xq, **kwargs)
    if error is not None:
        return classify_exception(error, ("baseline", "rule", "kernel", "X", "method"))
    outcome = check_attribution(full, posterior, Xq, np.atleast_2d(baselines), warned=warned)
    if outcome.kind != "ok":
        outcome.detail = f"{name}, {rule}: {outcome.detail}"
        return outcome
    mean_only, error, _ = call(gx.integrated_gradients, posterior, Xq, return_cov=False, **kwargs)
    if error is not None:
        return classify_exception(error, ("return_cov",))
    return check_same_mean(full, mean_only)


@guarded
def gradients_case(data) -> Outcome:
    X, lengthscale, name, posterior, error = _posterior(data, GRADIENT_KERNELS)
    if error is not None:
        return classify_exception(error, ("noise", "kernel", "X", "y"))
    Xq = X[:2].copy() if data.draw(st.booleans()) else data.draw(queries(X, lengthscale))
    grad, error, _ = call(gx.gradients, posterior, Xq)
    if error is not None:
        return classify_exception(error, ("kernel", "X"))
    if not np.all(np.isfinite(grad.mean)) or not np.all(np.isfinite(grad.cov)):
        return Outcome("silently_wrong", "non-finite gradient")
    eigenvalues = np.linalg.eigvalsh(grad.cov)
    top = max(float(np.max(np.abs(eigenvalues))), 1e-300)
    if float(np.min(eigenvalues)) < -1e-8 * top:
        return Outcome("silently_wrong", f"{name}: indefinite gradient covariance")
    # Independent reference: central differences of the posterior mean.
    step = 1e-5 * lengthscale
    reference = np.stack(
        [
            (posterior.predict_mean(Xq + np.eye(len(step))[i] * step[i])
             - posterior.predict_mean(Xq - np.eye(len(step))[i] * step[i])) / (2 * step[i])
            for i in range(len(step))
        ],
        axis=1,
    )
    scale = max(float(np.max(np.abs(reference))), float(np.max(np.abs(grad.mean))), 1e-300)
    # Central differences of m(x) = m0 + k(x, Z) a lose about eps * sum_n |k(x, z_n) a_n| / step
    # (the terms cancel in the sum, not only in the difference); allow 100 times that.
    terms = np.abs(posterior.kernel(Xq, posterior.train_inputs)) @ np.abs(posterior.alpha)
    scale_f = max(float(np.max(terms)), abs(posterior.mean), 1e-300)
    tolerance = 1e-4 * scale + 100 * np.finfo(float).eps * scale_f / float(np.min(step))
    if float(np.max(np.abs(grad.mean - reference))) > tolerance:
        return Outcome("silently_wrong", f"{name}: gradient differs from finite differences")
    return Outcome("ok")


@guarded
def baseline_labels_case(data) -> Outcome:
    """A pandas baseline is matched to the features by name, or refused."""
    X, lengthscale, _, posterior, error = _posterior(data, ("rbf",))
    if error is not None or X.shape[1] < 2:
        return Outcome("ok")
    names = [f"f{i}" for i in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=names)
    model = gx.ExactPosterior(frame, posterior.alpha * 0 + 1.0, kernel=posterior.kernel,
                              noise=0.1)
    Xq = pd.DataFrame(data.draw(queries(X, lengthscale)), columns=names)
    baseline = pd.Series(X.mean(axis=0) + lengthscale, index=names)
    reordered = baseline[names[::-1]]
    reference, _, _ = call(gx.integrated_gradients, model, Xq, baseline=baseline.to_numpy())
    shuffled, error, _ = call(gx.integrated_gradients, model, Xq, baseline=reordered)
    if error is not None:
        return classify_exception(error, ("baseline",))
    if not np.allclose(shuffled.mean, reference.mean, rtol=1e-10, atol=1e-300):
        return Outcome("silently_wrong", "pandas baseline used by position")
    return Outcome("ok")


@guarded
def mean_paths_case(data) -> Outcome:
    """Class 5: ``return_cov=False`` gives the mean of ``return_cov=True``, even on an
    ill-conditioned posterior (near-duplicate rows, noise near zero: |alpha| up to 1e12);
    the orthogonal additive kernel is the campaign's issue 27 item 21b case."""
    X, y, name, lengthscale, variance, _, rng = data.draw(
        problems(("rbf", "periodic", "matern52", "additive"))
    )
    # A near-duplicate row and noise near zero: alpha ~ 1 / noise along their difference.
    X[-1] = X[0] + data.draw(log_uniform(1e-12, 1e-6)) * lengthscale * rng.normal(size=len(X[0]))
    noise = data.draw(log_uniform(1e-14, 1e-8))
    posterior, error, _ = call(
        gx.ExactPosterior, X, y, kernel=build_kernel(name, lengthscale, variance), noise=noise
    )
    if error is not None:
        return classify_exception(error, ("noise", "kernel", "X", "y"))
    Xq = data.draw(queries(X, lengthscale))
    explainer = data.draw(st.sampled_from(["integrated_gradients", "gradients"]))
    function = getattr(gx, explainer)
    kwargs = dict(n_steps=16) if explainer == "integrated_gradients" else {}
    full, error, _ = call(function, posterior, Xq, **kwargs)
    if error is not None:
        return classify_exception(error, ("baseline", "kernel", "X"))
    light, error, _ = call(function, posterior, Xq, return_cov=False, **kwargs)
    if error is not None:
        return classify_exception(error, ("return_cov",))
    outcome = check_same_mean(full, light)
    outcome.detail = f"{name}, {explainer}: {outcome.detail}"
    return outcome


@guarded
def random_features_case(data) -> Outcome:
    """Class 8: a random-feature posterior with noise near zero on repeated rows predicts
    like its weight-space ridge solution (independent reference), or warns."""
    X, y, _, lengthscale, variance, _, rng = data.draw(problems(("rbf",)))
    repeats = data.draw(st.integers(1, 3))
    X, y = np.tile(X, (repeats, 1)), np.tile(y, repeats)
    n_frequencies = data.draw(st.integers(1, 40))
    noise = data.draw(log_uniform(1e-14, 1e-2))
    kernel = gx.kernels.RandomFeatureKernel.from_rbf(
        gx.kernels.RBF(lengthscale, variance), n_frequencies, random_state=0
    )
    posterior, error, warned = call(gx.RandomFeaturePosterior, X, y, kernel, noise, mean=0.0)
    if error is not None:
        return classify_exception(error, ("noise", "kernel", "X", "y"))
    design = kernel.features(X)
    stacked = np.vstack([design, np.sqrt(noise) * np.eye(design.shape[1])])
    weights = np.linalg.lstsq(stacked, np.concatenate([y, np.zeros(design.shape[1])]),
                              rcond=None)[0]
    Xq = np.vstack([X[:2], X[:2]])  # identical rows twice
    predicted = posterior.predict_mean(Xq)
    reference = kernel.features(Xq) @ weights
    # The ridge reference is itself accurate to about eps cond(stacked) |weights| |phi|.
    condition = np.linalg.cond(stacked)
    tolerance = 1e-8 * max(np.max(np.abs(y)), 1e-300) + 10 * np.finfo(float).eps * condition \
        * np.sqrt(variance) * np.linalg.norm(weights)
    if warned:  # the accuracy warning states how far the means may be off
        return Outcome("ok", warned=True)
    if np.max(np.abs(predicted[:2] - predicted[2:])) > tolerance:
        return Outcome("silently_wrong", "identical rows predicted differently")
    if np.max(np.abs(predicted - reference)) > tolerance:
        return Outcome("silently_wrong",
                       f"mean {np.max(np.abs(predicted - reference)):.2e} off the ridge solution")
    return Outcome("ok")


@guarded
def default_names_case(data) -> Outcome:
    """Class 1: a NumPy-fitted posterior refuses its own default names reordered."""
    X, lengthscale, _, posterior, error = _posterior(data, ("rbf",))
    if error is not None or X.shape[1] < 2:
        return Outcome("ok")
    Xq = data.draw(queries(X, lengthscale))
    order = data.draw(st.permutations(range(X.shape[1])))
    if list(order) == list(range(X.shape[1])):
        return Outcome("ok")
    frame = pd.DataFrame(Xq[:, order], columns=[f"x{i}" for i in order])
    entry = data.draw(st.sampled_from(["predict_mean", "integrated_gradients", "gradients"]))
    function = getattr(posterior, entry) if entry == "predict_mean" else (
        lambda Q: getattr(gx, entry)(posterior, Q))
    result, error, _ = call(function, frame)
    if error is not None:
        return classify_exception(error, ("columns", "X"))
    return Outcome("silently_wrong", f"{entry} took reordered default names by position")


INVALID_PARAMETERS = [
    ("GPRegressor(random_state=-1)", lambda X, y: gx.GPRegressor(random_state=-1).fit(X, y),
     ("random_state",)),
    ("GPRegressor(random_state=1.5)", lambda X, y: gx.GPRegressor(random_state=1.5).fit(X, y),
     ("random_state",)),
    ("ExactPosterior(noise=None)",
     lambda X, y: gx.ExactPosterior(X, y, gx.kernels.RBF(), noise=None), ("noise",)),
    ("RBF(variance='1')", lambda X, y: gx.kernels.RBF(variance="1"), ("variance",)),
    ("integrated_gradients(n_steps=2.5)",
     lambda X, y: gx.integrated_gradients(
         gx.ExactPosterior(X, y, gx.kernels.RBF(), noise=0.1), X, n_steps=2.5),
     ("n_steps",)),
    ("ragged X", lambda X, y: gx.GPRegressor().fit([[1.0, 2.0], [3.0]], [1.0, 2.0]), ("X",)),
    ("GPRegressor(kernel=RBF(1e-9))",
     lambda X, y: gx.GPRegressor(kernel=gx.kernels.RBF(1e-9)).fit(X, y), ("lengthscale",)),
    ("GPXRegressor(n_restarts=-1)", lambda X, y: gx.GPXRegressor(n_restarts=-1).fit(X, y),
     ("n_restarts",)),
    ("duplicate column names",
     lambda X, y: gx.GPRegressor().fit(pd.DataFrame(np.ones((3, 2)), columns=["a", "a"]),
                                       [1.0, 2.0, 3.0]),
     ("column", "duplicate")),
]


@guarded
def invalid_parameter_case(data) -> Outcome:
    label, make, names = data.draw(st.sampled_from(INVALID_PARAMETERS))
    X = np.random.default_rng(0).normal(size=(8, 2))
    y = X[:, 0]
    result, error, _ = call(make, X, y)
    if error is None:
        return Outcome("silently_wrong", f"{label} accepted")
    outcome = classify_exception(error, names)
    outcome.detail = f"{label}: {outcome.detail}"
    return outcome


@guarded
def multi_output_fit_case(data) -> Outcome:
    """A coregionalised fit (ICM or LMC) of two targets on a small table (duplicated rows,
    targets from unrelated to proportional) predicts finite values and explains each output
    completely, or refuses naming what; this session's 40-row ICM fit died with torch's
    ``_LinAlgError`` when a line search tried an indefinite kernel matrix."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    n, d = data.draw(st.integers(8, 40)), data.draw(st.integers(1, 3))
    X = data.draw(log_uniform(1e-2, 1e3)) * rng.normal(size=(n, d))
    if data.draw(st.booleans()):  # exact duplicates, as in real tables
        X[-1] = X[0]
    scaled = X / np.maximum(X.std(0), 1e-300)
    y = np.sin(scaled[:, 0]) + scaled[:, -1]
    mixing = data.draw(st.sampled_from([0.0, 0.5, 1.0]))  # 1: the second target is the first
    second = mixing * y + (1 - mixing) * scaled[:, 0] * scaled[:, -1]
    Y = np.column_stack([y, second + data.draw(log_uniform(1e-8, 1e-1)) * rng.normal(size=n)])
    form = data.draw(st.sampled_from(["icm", "lmc"]))
    model, error, _ = call(gx.GPRegressor(multi_output=form, max_iter=50).fit, X, Y)
    if error is not None:
        return classify_exception(error, ("X", "y", "rows", "columns"))
    prediction = model.predict(X)
    if not np.all(np.isfinite(prediction)):
        return Outcome("silently_wrong", f"{form}: non-finite predictions")
    for output in range(2):
        marginal = model.posterior_.marginal(output)
        attr, error, warned = call(gx.integrated_gradients, marginal, X[:2])
        if error is not None:
            return classify_exception(error, ("baseline", "X"))
        outcome = check_attribution(attr, marginal, X[:2], np.atleast_2d(X.mean(0)),
                                    warned=warned)
        if outcome.kind != "ok":
            outcome.detail = f"{form}, output {output}: {outcome.detail}"
            return outcome
    return Outcome("ok")


@guarded
def sensitivity_identities_case(data) -> Outcome:
    """Issue 27 item 15: Sobol indices of a squared-exponential GP with noise down to 1e-12 of
    its variance (nearly interpolating) under each measure satisfy the identities of a
    variance decomposition (0 <= first <= Shapley <= total <= Var, Shapley effects summing to
    Var) and have posterior expectations at least the mean's (each index is a variance of a
    component of f = m + g), or say they do not (CompletenessWarning)."""
    X, y, _, lengthscale, variance, _, _ = data.draw(problems(("rbf",)))
    noise = variance * data.draw(log_uniform(1e-12, 1e-1))
    posterior, error, _ = call(gx.ExactPosterior, X, y,
                               kernel=build_kernel("rbf", lengthscale, variance), noise=noise)
    if error is not None:
        return classify_exception(error, ("noise", "kernel", "X", "y"))
    low, high = X.min(0), X.max(0)
    measure = data.draw(st.sampled_from([
        None, gx.measures.Empirical(X),
        gx.measures.Uniform(low - 0.1 * lengthscale, high + 0.1 * lengthscale)]))
    result, error, warned = call(gx.global_sensitivity, posterior, measure)
    if error is not None:
        return classify_exception(error, ("measure", "kernel"))
    fields = ("first_order", "total", "shapley_effects", "expected_first_order",
              "expected_total", "expected_shapley_effects", "first_order_std", "total_std")
    if not all(np.all(np.isfinite(getattr(result, name))) for name in fields):
        return Outcome("silently_wrong", "non-finite index")
    first, shapley, total = result.first_order, result.shapley_effects, result.total
    var = result.total_variance
    tolerance = 1e-8 * max(var, result.expected_total_variance, 1e-300)
    breaks = {
        "first order below 0": -first.min(),
        "first above Shapley": np.max(first - shapley),
        "Shapley above total": np.max(shapley - total),
        "total above Var": np.max(total - var),
        "Shapley sum off Var": abs(shapley.sum() - var),
        "expectation below the mean's": np.max(
            np.concatenate([[var], first, total]) - np.concatenate(
                [[result.expected_total_variance], result.expected_first_order,
                 result.expected_total])),
    }
    worst = max(breaks, key=breaks.get)
    if breaks[worst] > tolerance and not warned:
        return Outcome("silently_wrong", f"{worst} by {breaks[worst]:.3g} (Var {var:.3g}, "
                       f"noise / variance {noise / variance:.2g})")
    return Outcome("ok", warned=warned)


CASES = (
    integrated_gradients_case, gradients_case, baseline_labels_case, invalid_parameter_case,
    mean_paths_case, random_features_case, default_names_case, multi_output_fit_case,
    sensitivity_identities_case, *POE_CASES, *FILE_CASES,
)
