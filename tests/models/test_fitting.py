"""The one restart loop (``best_of_starts``): its policy, independently of any GP."""

from __future__ import annotations

import pytest

from gpexplain.models._fitting import FitError, best_of_starts


def _lml(hyper):
    if hyper == "indefinite":
        raise ValueError("not positive definite")
    return -float(hyper)


def test_policy_keeps_stopped_early_and_discards_failures():
    outcomes = {0: (3.0, False), 1: None, 2: (1.0, True), 3: ("indefinite", False)}
    best_lml, best, restarts = best_of_starts(
        list(range(4)), lambda index, start: outcomes[index], _lml, "hint"
    )
    # The start that stopped early at its best evaluated point wins on its likelihood.
    assert (best_lml, best) == (-1.0, 1.0)
    assert [r["log_marginal_likelihood"] for r in restarts] == [-3.0, None, -1.0, None]
    assert [r["stopped_early"] for r in restarts] == [False, None, True, False]


def test_every_start_failing_is_a_fit_error_with_the_hint():
    with pytest.raises(FitError, match="every starting point; try this"):
        best_of_starts([0, 1], lambda index, start: None, _lml, "try this")
