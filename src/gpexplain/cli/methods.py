"""What each ``--method`` computes for the rows of a fitted model.

The functions come from the explanation-method registry (``gpexplain.explain.methods``); this
module turns a ``Choice`` (the ``--game``, ``--background`` and ``--baseline`` options) into
their arguments.
"""

from __future__ import annotations

import numpy as np

from gpexplain._registry import Registry
from gpexplain.explain.methods import METHODS
from gpexplain.kernels.measures import Gaussian
from gpexplain.posterior.linked import latent_posterior

__all__ = [
    "ARGUMENTS", "MAX_IMPORTANCE_SECONDS", "explain", "explain_variance", "extras", "importance",
    "method_id", "probability_attribution",
]


def _shapley_game(model, baseline, options: dict, target_class) -> dict:
    """``shapley_values``' arguments for the ``--game``: the ``--baseline`` (baseline game),
    the columns' Gaussian product measure (product-measure), or ``--background`` training
    rows drawn with the seed (interventional). A family with its own game (the additive GP)
    has no ``game`` option and needs none."""
    game = options.get("game")
    if game is None:
        return {}
    if game == "baseline":
        return {"baseline": baseline}
    data = latent_posterior(model, target_class)[0].data_inputs
    if game == "product-measure":
        return {"measure": Gaussian(data.mean(0), data.std(0) + 1e-12)}
    size = min(options["background"], len(data))
    rows = np.random.default_rng(options["seed"]).choice(len(data), size, replace=False)
    return {"background": data[np.sort(rows)]}


def _integrated_gradients(choice, model, baseline, client, target_class) -> dict:
    latent = {} if target_class is None else {"output": "latent", "target_class": target_class}
    return {"baseline": baseline, "client": client, **latent}


def _shapley(choice, model, baseline, client, target_class) -> dict:
    return {"client": client, "target_class": target_class,
            **_shapley_game(model, baseline, choice.options, target_class)}


def _interactions(choice, model, baseline, client, target_class) -> dict:
    if client is not None:  # the interaction covariances run in this process
        raise ValueError("--dask-scheduler/--workers do not apply to --method interactions")
    return {"target_class": target_class,
            **_shapley_game(model, baseline, choice.options, target_class)}


def _gpx_contributions(choice, model, baseline, client, target_class) -> dict:
    if client is not None:  # GPX explains through its own model, not the driver's chunks
        raise ValueError("--dask-scheduler/--workers do not apply to --model gpx")
    return {"what": "contributions"}


# For each ``METHODS`` entry with a ``--method`` value: its arguments from the command line's
# options, ``arguments(choice, model, baseline, client, target_class) -> dict``. A method's
# contract case (tests/contracts/test_methods.py) fails if its entry is missing here.
ARGUMENTS = Registry("command-line method")
ARGUMENTS.register("integrated-gradients", _integrated_gradients)
ARGUMENTS.register("shapley", _shapley)
ARGUMENTS.register("gpx-contributions", _gpx_contributions)
ARGUMENTS.register("shapley-interactions", _interactions)


def method_id(cli_name: str) -> str:
    """The ``METHODS`` name of a ``--method`` value."""
    return next(name for name, method in METHODS.items() if method.cli_name == cli_name)


def explain(choice, model, X, baseline, client=None, target_class=None):
    """The attribution of ``choice.method`` for the rows ``X`` (on a Dask cluster when
    ``client`` is given); classifiers: of the latent of ``target_class``.

    Raises
    ------
    ValueError
        Bad options for the method, or a Dask cluster for GPX (which explains through its own
        model, not the driver).
    """
    name = method_id(choice.method)
    arguments = ARGUMENTS.get(name)(choice, model, baseline, client, target_class)
    function = METHODS.get(name).function
    if _importance_seconds(len(X), X.shape[1]) <= MAX_IMPORTANCE_SECONDS:
        # the covariance across points, for the importance (evaluated lazily, when asked)
        try:
            return function(model, X, return_cov="points", **arguments)
        except NotImplementedError:  # refused before any work: no two-point prior term
            pass
    return function(model, X, **arguments)


#: CPU seconds per pair of explained rows and squared feature that the exact importance costs
#: beyond a quadrature scheme's two-point prior term: the closed-form covariance blocks
#: (integrated gradients on an RBF kernel, 64 nodes per path) and the folded-normal product
#: moments of mean |attribution|. Measured on red wine (11 features) on 2 loaded cores: 2.4 s
#: at 100 rows (5,050 pairs) and 5.8 s at 200, at most 4.7e-4 s per pair.
IMPORTANCE_SECONDS_PER_PAIR_FEATURE = 4e-6
#: Longest estimated time the command line spends on the exact importance (quadrature on a
#: GPyTorch kernel, e.g. --kernel matern52, adds about 0.07 s per pair of rows at 8 features
#: and 64 nodes: 20 rows then take 15 s); above it summary.json and the figure say it was
#: skipped and why. With 11 features and a closed form: up to about 340 rows.
MAX_IMPORTANCE_SECONDS = 30.0


def _importance_seconds(n_points: int, n_features: int) -> float:
    return IMPORTANCE_SECONDS_PER_PAIR_FEATURE * n_features**2 * n_points * (n_points + 1) / 2


def importance(attr):
    """``(GlobalImportance or None, reason)``: the exact mean |attribution| importance of
    ``attr`` (``gx.global_importance``), or why it was not computed."""
    from gpexplain.explain.global_importance import importance_of

    seconds = _importance_seconds(attr.n_points, attr.mean.shape[1])
    if attr.point_cov is not None:
        seconds += attr.point_cov.estimated_seconds()
    if seconds > MAX_IMPORTANCE_SECONDS:
        return None, (f"the exact importance of the {attr.n_points} explained rows would take "
                      f"about {seconds:.0f} s (it grows with the pairs of rows; the command "
                      f"line's bound is {MAX_IMPORTANCE_SECONDS:g} s); use gx.global_importance "
                      "in Python")
    if attr.point_cov is None:
        return None, "the method has no covariance across points for this model yet"
    return importance_of(attr, "mean_abs"), ""


def importance_between(encoded, grouped, encoder):
    """``(MultiOutputImportance or None, reason)``: the exact mean |attribution| importance of
    each target of a coregionalised model and its posterior covariance between targets
    (``gx.global_importance`` of a ``MultiOutputAttribution``), or why it was not computed.

    ``encoded`` is the joint explanation of the model's columns and ``grouped`` each target's
    ``Attribution`` of the file's columns (``encoder.group``); the joint covariance across
    rows and targets is grouped by the encoder's 0/1 matrix, target by target."""
    from gpexplain.attribution import group_matrix
    from gpexplain.explain.global_importance import importance_of
    from gpexplain.multi_output_attribution import MultiOutputAttribution

    parts = list(grouped.values())
    seconds = _importance_seconds(parts[0].n_points, parts[0].mean.shape[1] * len(parts))
    seconds += encoded.joint_point_cov.estimated_seconds()
    if seconds > MAX_IMPORTANCE_SECONDS:
        return None, (f"the covariance of the importances between targets would take about "
                      f"{seconds:.0f} s (the command line's bound is "
                      f"{MAX_IMPORTANCE_SECONDS:g} s); use gx.global_importance in Python")
    _, matrix = group_matrix(encoder.groups_, encoded.feature_names)
    joint = encoded.joint_point_cov.grouped(np.kron(np.eye(len(parts)), matrix))
    return importance_of(MultiOutputAttribution(parts, list(grouped), independent=False,
                                                joint_point_cov=joint), "mean_abs"), ""


def explain_variance(choice, model, X, baseline):
    """``--explain variance``: attributions of the posterior variance of the rows ``X``,
    exact Shapley values of the same game as the mean's under ``--method shapley`` with a
    ``--game``, integrated gradients from the ``--baseline`` otherwise."""
    from gpexplain.explain.variance import explain_variance as variance_attribution

    if choice.method == "shapley" and choice.options.get("game") is not None:
        return variance_attribution(model, X, method="shapley",
                                    **_shapley_game(model, baseline, choice.options, None))
    return variance_attribution(model, X, method="ig", baseline=baseline)


def probability_attribution(model, X, baseline, target_class):
    """Integrated gradients of the expected probability of ``target_class``, means only (the
    binary covariance costs G^2 path-node pairs per row; the command line's intervals are the
    latent's)."""
    return METHODS.get("integrated-gradients").function(
        model, X, baseline=baseline, target_class=target_class, return_cov=False
    )


def extras(family, model, X) -> dict:
    """What ``family`` explains beside the rows ``X``: ``{"weights": Attribution}`` (GPX's
    local linear weights) and ``{"global": GlobalShapleyValues}`` (the additive GP's global Shapley
    values), as its ``extras`` declare."""
    found = {}
    if "weights" in family.extras:
        found["weights"] = model.explain(X, what="weights")
    if "global-shapley" in family.extras:
        found["global"] = METHODS.get("global-shapley").function(model)
    return found
