"""Ax: what drives each metric, why the surrogate is unsure, and why Ax proposes its next trial.

``gx.from_ax(client)`` gives each metric's fitted surrogate as a posterior over Ax's parameters
(``gpexplain.posterior.ax``); this module builds the three questions of a Bayesian-optimisation
run on it:

* ``sensitivity(client, metric)``: global Sobol indices and Shapley effects under the search
  space's box (``gx.measures.Uniform``), exact (``gx.global_sensitivity``), each with its
  posterior standard deviation, as a table and a figure with error bars;
* ``gx.explain_variance(gx.from_ax(client)[metric], X)``: why the surrogate is unsure;
* ``explain_candidate(client)``: integrated gradients of the acquisition value of the last
  candidate Ax generated, with Ax's own acquisition function (``gx.explain_acquisition``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpexplain.explain.acquisition import explain_acquisition
from gpexplain.explain.sensitivity import global_sensitivity
from gpexplain.global_attribution import GlobalSensitivity
from gpexplain.kernels.measures import Uniform
from gpexplain.posterior.ax import ax_adapter, from_ax

__all__ = ["AxSensitivity", "explain_candidate", "from_ax", "search_box", "sensitivity"]


@dataclass(frozen=True)
class AxSensitivity:
    """Global sensitivity of one metric's surrogate under Ax's search box.

    Attributes
    ----------
    result : GlobalSensitivity
    metric : str
    low, high : ndarray (n_parameters,)
        The box.
    """

    result: GlobalSensitivity
    metric: str
    low: np.ndarray
    high: np.ndarray

    @property
    def table(self) -> pd.DataFrame:
        """One row per parameter: Sobol indices and Shapley effects of the posterior mean
        (shares of its variance over the box), and the posterior expectations and standard
        deviations of the unnormalised variances (squared units of the metric)."""
        r = self.result
        total = r.total_variance if r.total_variance > 0 else np.nan
        return pd.DataFrame({
            "first_order_index": r.first_order / total,
            "total_index": r.total / total,
            "shapley_effect_share": r.shapley_effects / total,
            "first_order": r.expected_first_order, "first_order_std": r.first_order_std,
            "total": r.expected_total, "total_std": r.total_std,
            "shapley_effect": r.expected_shapley_effects,
            "shapley_effect_std": r.shapley_effects_std,
        }, index=pd.Index(r.feature_names, name="parameter"))

    def figure(self, ax=None):
        """``gx.plot.plot_global_sensitivity``: bars with +-1.96 posterior std error bars."""
        from gpexplain.plot import plot_global_sensitivity

        figure = plot_global_sensitivity(self.result, ax=ax)
        figure.axes[0].set_xlabel(f"variance of {self.metric} (squared units); dots: of the "
                                  "posterior mean; box: Ax's search space")
        return figure


def search_box(source) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds of the non-fixed range parameters, in the adapter's order."""
    adapter = ax_adapter(source)
    parameters = adapter._search_space.parameters
    low = np.array([float(parameters[name].lower) for name in adapter.parameters])
    high = np.array([float(parameters[name].upper) for name in adapter.parameters])
    return low, high


def sensitivity(source, metric: str, *, refit: bool = False) -> AxSensitivity:
    """Exact Sobol indices and Shapley effects of ``metric``'s surrogate over Ax's box.

    Parameters
    ----------
    source : ax.Client, AxClient or TorchAdapter
    metric : str
    refit : bool, default False
        As in ``gx.from_ax``.

    Returns
    -------
    AxSensitivity
        ``.table`` (a DataFrame) and ``.figure()`` (error bars: posterior stds).

    Raises
    ------
    TypeError, ValueError
        As ``gx.from_ax`` and ``gx.global_sensitivity`` (the box needs squared-exponential or
        rational-quadratic factors).
    """
    posterior = from_ax(source, [metric], refit=refit)[metric]
    low, high = search_box(source if not refit else ax_adapter(source, True))
    result = global_sensitivity(posterior, Uniform(low, high))
    return AxSensitivity(result, metric, low, high)


def explain_candidate(source, trial_index: int | None = None, *, baseline=None,
                      method: str = "ig", n_steps: int = 64, max_panels: int = 256):
    """Integrated gradients or exact Shapley values of the acquisition value of a candidate
    Ax generated.

    Uses the acquisition function of the generation strategy's current BoTorch adapter (the
    one that generated the last candidate; its values in Ax's transformed outcome units),
    on the inputs it sees (Ax's parameters, fixed ones left out).

    Parameters
    ----------
    source : ax.Client or AxClient
    trial_index : int, optional
        Default: the last trial.
    baseline : array-like (n_parameters,), optional
        Default: the mean of the observed parameters (not an observed point: Monte Carlo
        acquisition functions of BoTorch with cached Cholesky factors jump there, at the
        observed points themselves).
    method : {"ig", "shapley"}
        As ``gx.explain_acquisition`` (Shapley values of the baseline game, by enumeration).
    n_steps, max_panels : int
        The quadrature of ``gx.explain_acquisition`` (``method="ig"``).

    Returns
    -------
    AcquisitionExplanation
        (``total``; UCB-type functions also split, see ``gx.explain_acquisition``). Ax's
        default qLogNoisyExpectedImprovement is numerically discontinuous where its value
        crosses about log(eps) = -36 (BoTorch 0.18.1): from a baseline in that tail the
        completeness gap can be large, and is warned with its size.

    Raises
    ------
    ValueError
        No BoTorch adapter has generated a candidate yet (still in the Sobol phase).
    """
    adapter = ax_adapter(source)
    acquisition = getattr(adapter.generator, "_acquisition", None)
    if acquisition is None:
        raise ValueError(
            "no acquisition function yet: Ax has not generated a candidate with a BoTorch "
            "model (still in its initial Sobol trials); call client.get_next_trials first."
        )
    experiment = getattr(source, "_experiment", None) or source.experiment
    index = max(experiment.trials) if trial_index is None else int(trial_index)
    parameters = experiment.trials[index].arm.parameters
    candidate = np.array([[float(parameters[name]) for name in adapter.parameters]])
    return explain_acquisition(acquisition.acqf, candidate, baseline=baseline, method=method,
                               n_steps=n_steps, max_panels=max_panels,
                               feature_names=list(adapter.parameters))
