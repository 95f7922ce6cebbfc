"""Outcome classification for property-based fuzzing of gpexplain's public API.

Every fuzzed call ends in exactly one outcome:

* ``ok``: a result that passes every property check, or a clear refusal (``ValueError`` /
  ``TypeError`` whose message names the argument it is about);
* ``silently_wrong``: a result that violates a documented property (completeness beyond the
  documented tolerance without a warning, an indefinite covariance, a mean that differs
  between ``return_cov=True`` and ``False``, labels used by position, a non-finite value);
* ``unclear_error``: any other exception type, or a refusal that does not name the argument
  (on the command line: any exit but 0, or exit 2 without one ``Error:`` line naming the
  column at fault; ``classify_exit``);
* ``hang``: the call took longer than ``SECONDS_PER_CALL`` (``guarded``).

The checks are written against the README's promises, independently of the library's own
``completeness_gap`` (the targets are recomputed from ``ExactPosterior.predict``).
"""

from __future__ import annotations

import signal
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

OUTCOMES = ("ok", "silently_wrong", "unclear_error", "hang")
SECONDS_PER_CALL = 30

# Completeness the README promises: 1e-10 relative for closed forms, 1e-8 for the graded
# quadrature at 64 nodes. A violation beyond 1e-6 relative without a warning is a defect.
COMPLETENESS_RTOL = 1e-6
# The variance gap is measured against at least this fraction of the prior variance, so that
# COMPLETENESS_RTOL of it is ~100 eps of the prior: the rounding of prior - data term.
VARIANCE_ROUNDING = 1e-8


@dataclass
class Outcome:
    kind: str
    detail: str = ""
    warned: bool = False
    extra: dict = field(default_factory=dict)


def _relative_gap(actual, target, scale) -> float:
    return float(np.max(np.abs(actual - target)) / max(scale, 1e-300))


def check_attribution(attr, posterior, X, baselines, *, warned: bool) -> Outcome:
    """Properties every complete attribution with a covariance must satisfy."""
    for name in ("mean", "cov", "prediction", "difference_variance"):
        value = getattr(attr, name)
        if value is not None and not np.all(np.isfinite(value)):
            return Outcome("silently_wrong", f"non-finite {name}")
    # Completeness targets recomputed from the posterior's own joint predictive distribution.
    points = np.vstack([X, baselines])
    mean, cov = posterior.predict(points, return_cov=True)
    n = len(X)
    weights = np.full(len(baselines), 1.0 / len(baselines))
    target_mean = mean[:n] - weights @ mean[n:]
    target_var = (
        np.diag(cov)[:n] - 2.0 * cov[:n, n:] @ weights + weights @ cov[n:, n:] @ weights
    )
    scale_mean = max(float(np.max(np.abs(mean))), float(np.sqrt(np.max(np.diag(cov)))), 1e-12)
    gap_mean = _relative_gap(attr.mean.sum(1), target_mean, scale_mean)
    if gap_mean > COMPLETENESS_RTOL and not warned:
        return Outcome("silently_wrong", f"mean completeness gap {gap_mean:.2e} (relative)")
    if attr.cov is not None:
        # A posterior variance is the prior's minus a data term: both the target and the
        # attributions carry rounding of ~eps times the PRIOR variance, which is a large
        # relative gap where the data pin the variance down (noise 1e-9: 1e-9 of the prior).
        prior = float(np.max(posterior.kernel.diag(points)))
        scale_var = max(float(np.max(np.diag(cov))), VARIANCE_ROUNDING * prior, 1e-300)
        gap_var = _relative_gap(attr.cov.sum((1, 2)), target_var, scale_var)
        if gap_var > COMPLETENESS_RTOL and not warned:
            return Outcome("silently_wrong", f"variance completeness gap {gap_var:.2e}")
        eigenvalues = np.linalg.eigvalsh(attr.cov)
        top = max(float(np.max(np.abs(eigenvalues))), 1e-300)
        if float(np.min(eigenvalues)) < -1e-8 * top and not warned:
            return Outcome(
                "silently_wrong", f"indefinite covariance (eigenvalue {np.min(eigenvalues):.3g})"
            )
    return Outcome("ok", warned=warned)


def check_same_mean(with_cov, without_cov) -> Outcome:
    """``return_cov=False`` must return the same mean as ``return_cov=True``."""
    scale = max(float(np.max(np.abs(with_cov.mean))), 1e-12)
    gap = _relative_gap(without_cov.mean, with_cov.mean, scale)
    if gap > 1e-8:
        return Outcome("silently_wrong", f"mean-only differs from mean+cov by {gap:.2e}")
    return Outcome("ok")


def classify_exception(error: BaseException, argument_names: tuple[str, ...]) -> Outcome:
    """A refusal is clear when it is a ValueError/TypeError naming one of the arguments."""
    if isinstance(error, ValueError | TypeError):
        message = str(error)
        if any(name in message for name in argument_names):
            return Outcome("ok", f"refused: {type(error).__name__}")
        return Outcome("unclear_error", f"{type(error).__name__} not naming an argument: {message}")
    return Outcome("unclear_error", f"{type(error).__name__}: {error}")


def call(function, *args, **kwargs):
    """Run a call, returning (result or None, exception or None, warned)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = function(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 - every exception is classified
            return None, error, bool(caught)
    return result, None, any(
        "completeness" in str(w.message) or "accuracy" in str(w.message) for w in caught
    )


class _Hang(Exception):
    pass


@contextmanager
def time_limit(seconds: int = SECONDS_PER_CALL):
    """Interrupt a call that takes longer than ``seconds`` (a hang, for the fuzzer)."""

    def interrupt(signum, frame):
        raise _Hang

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def guarded(case):
    """Turn a time-out inside ``case`` into the ``hang`` outcome."""

    def run(data) -> Outcome:
        try:
            with time_limit():
                return case(data)
        except _Hang:
            return Outcome("hang", f"{case.__name__} exceeded {SECONDS_PER_CALL} s")

    run.__name__ = case.__name__
    return run


def classify_exit(result, names: tuple[str, ...]) -> Outcome:
    """A command-line refusal is clear when it exits 2 with one ``Error:`` line naming one of
    ``names`` (the column or option at fault); a crash (any other exit) never is."""
    if result.exit_code == 2:
        lines = result.output.strip().splitlines()
        errors = [line for line in lines if line.startswith("Error: ")]
        if len(errors) == 1 and any(name in errors[0] for name in names):
            return Outcome("ok", "refused: exit 2")
        return Outcome("unclear_error", f"exit 2 without one line naming {names}: "
                                        f"{result.output.strip()[-300:]}")
    if result.exit_code == 0:
        return Outcome("ok")
    error = result.exception
    return Outcome("unclear_error", f"exit {result.exit_code}: {type(error).__name__}: {error}")
