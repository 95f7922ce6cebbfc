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



def test_tolerance_stops_when_the_best_loss_stalls_and_keeps_the_best_point():
    """With a tolerance the loop stops once the best loss improved by less than it over the
    last CONVERGENCE_WINDOW evaluations (before max_iter and before L-BFGS's own stop),
    holding the best point evaluated; without one it runs on."""
    import torch

    from gpexplain.models._fitting import CONVERGENCE_WINDOW, minimise_keeping_best

    def run(tolerance):
        module = torch.nn.Linear(20, 1, bias=False).double()
        module.weight.data.fill_(-1.0)
        losses, calls = [], []

        def loss():  # the chained Rosenbrock valley: L-BFGS creeps along it
            x = module.weight[0]
            value = (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()
            losses.append(value.item())
            return value

        stopped = minimise_keeping_best(module, loss, 500, lambda s, t: calls.append((s, t)),
                                        0, 1, tolerance)
        with torch.no_grad():
            final = loss().item()
        return stopped, losses[:-1], calls, final

    stopped, losses, calls, final = run(3.0)
    assert stopped is False and CONVERGENCE_WINDOW < len(losses) < 50
    assert final == min(losses)  # the best point evaluated
    assert min(losses[:-CONVERGENCE_WINDOW]) - min(losses) < 3.0 <= losses[0] - min(losses)
    assert calls[-1] == (500, 500)  # the start's share of the progress completed
    _, unlimited, _, _ = run(None)
    assert len(unlimited) > 100 and min(unlimited) < 1e-6
