"""Matplotlib figures of attributions with their posterior uncertainty.

Figures are built with ``matplotlib.figure.Figure`` directly (no pyplot state), so they are
safe in scripts, servers and tests with any backend and need no explicit closing; save them
with ``fig.savefig(path)``. To draw into existing pyplot axes, pass ``ax``.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from scipy.stats import norm

from gpexplain.attribution import Attribution
from gpexplain.global_attribution import GlobalSensitivity

__all__ = [
    "plot_attributions",
    "plot_dependence",
    "plot_global_importance",
    "plot_global_sensitivity",
    "plot_global_shapley",
    "plot_interaction_dependence",
    "plot_interactions",
    "plot_summary",
    "plot_waterfall",
    "simultaneous_band_factor",
]

_POSITIVE = "#c0392b"
_NEGATIVE = "#2e86c1"
_LEVEL = 0.95


def _check_attribution(attr) -> Attribution:
    if not isinstance(attr, Attribution):
        raise TypeError(f"attr must be a gpexplain Attribution, got {type(attr).__name__}.")
    return attr


# Deterministic summaries (DESIGN.md): what an attribution explains, read from the start of
# its ``method`` (gx.explain_variance, gx.explain_acquisition), and in which units.
_DETERMINISTIC = (
    ("posterior variance", "squared units of the target"),
    ("posterior standard deviation", "units of the target"),
    ("acquisition function", "units of the acquisition function"),
    ("exploration", "units of the acquisition function"),
)


def _deterministic(attr: Attribution) -> tuple[str, str] | None:
    """``(what is explained, its units)`` for a deterministic summary's attributions (no
    posterior over them: no intervals are drawn), None for a Gaussian attribution."""
    for name, units in _DETERMINISTIC:
        if attr.method.startswith(name):
            latent = " of the latent" in attr.method  # a classifier's latent, not the target
            return name, units.replace("units of the target", "latent units") if latent else units
    return None


def _panel_height(n_features: int) -> float:
    return 1.2 + 0.32 * n_features


def _plain(text) -> str:
    """``text`` drawn as it is: feature names, category labels and point labels come from the
    user's table, and a ``$`` in them would otherwise start matplotlib's mathtext (an
    unbalanced or invalid one fails when the figure is drawn)."""
    return str(text).replace("$", r"\$")


def _ranking_axes(names: list[str], ax: Axes | None) -> tuple[Figure, Axes]:
    """The given axes, or a new figure sized for one horizontal bar row per name."""
    if ax is not None:
        return ax.figure, ax
    longest = max(len(name) for name in names)
    figure = Figure(
        figsize=(4.8 + 0.075 * longest, _panel_height(len(names))), layout="constrained"
    )
    return figure, figure.subplots()


def _rank_rows(ax: Axes, ranked_names: list[str]) -> None:
    """Label bar rows 0, 1, ... with ``ranked_names``, the first at the top; light x grid."""
    ax.set_yticks(np.arange(len(ranked_names)), [_plain(name) for name in ranked_names])
    if not ax.yaxis_inverted():
        ax.invert_yaxis()
    ax.grid(axis="x", color="0.9", linewidth=0.6)
    ax.set_axisbelow(True)


def plot_attributions(
    attr: Attribution,
    points: Sequence[int] | None = None,
    max_points: int = 4,
    ax: Axes | Sequence[Axes] | None = None,
    *,
    point_labels: Sequence[str] | None = None,
    xlabel: str | None = None,
) -> Figure:
    """Horizontal bars of attribution means with 95% credible intervals, one panel per point.

    Each panel shows, for one explained point, the posterior mean of every feature's
    attribution (red: pushes the prediction up, blue: down) with an error bar spanning the
    central 95% credible interval ``mean +- 1.96 std`` of its Gaussian posterior
    (``attr.interval(0.95)``). Features keep the order of ``attr.feature_names``, first at
    the top, so panels can be compared side by side. The panel title gives the prediction
    and the baseline prediction; by completeness the bars sum to their difference.

    Parameters
    ----------
    attr : Attribution
        For example the result of ``gx.integrated_gradients``. Without a covariance
        (``attr.cov is None``) the bars have no error bars.
    points : sequence of int, optional
        Positions (0 .. ``attr.n_points - 1``) of the points to draw. Default: the first
        ``max_points`` points.
    max_points : int, default 4
        Number of points drawn when ``points`` is not given.
    ax : matplotlib Axes or sequence of Axes, optional
        Where to draw: one Axes per point. Default: a new figure with the panels side by side.
    point_labels : sequence of str, optional
        Label of each drawn point in the panel titles (e.g. the original row numbers).
        Default ``"point <position>"``.
    xlabel : str, optional
        The x-axis label. Default ``"attribution (units of the target)"``; explanations that
        are not attributions of the prediction (e.g. POE's gradient-like local weights) say
        what they are here.

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the panels.

    Raises
    ------
    TypeError
        ``attr`` is not an ``Attribution``.
    ValueError
        ``points`` empty or out of range, ``max_points < 1``, or ``ax``/``point_labels`` not
        matching the number of points.
    """
    attr = _check_attribution(attr)
    if points is None:
        if int(max_points) < 1:
            raise ValueError(f"max_points must be at least 1, got {max_points}.")
        points = list(range(min(int(max_points), attr.n_points)))
    else:
        points = [int(p) for p in np.atleast_1d(points)]
    if not points:
        raise ValueError("points is empty; give at least one point position to draw.")
    bad = [p for p in points if not 0 <= p < attr.n_points]
    if bad:
        raise ValueError(
            f"points {bad} out of range; the attribution has {attr.n_points} points "
            f"(positions 0 to {attr.n_points - 1})."
        )
    if point_labels is None:
        point_labels = [f"point {p}" for p in points]
    elif len(point_labels) != len(points):
        raise ValueError(
            f"point_labels has {len(point_labels)} entries for {len(points)} points."
        )

    if ax is None:
        n_features = attr.n_features
        figure = Figure(
            figsize=(2.0 + 3.6 * len(points), _panel_height(n_features)), layout="constrained"
        )
        axes = list(np.atleast_1d(figure.subplots(1, len(points), sharey=True, squeeze=False)[0]))
    else:
        axes = [ax] if isinstance(ax, Axes) else list(ax)
        if len(axes) != len(points):
            raise ValueError(
                f"ax has {len(axes)} axes for {len(points)} points; pass one Axes per point "
                "(or choose the points with points=[...])."
            )
        figure = axes[0].figure

    lower, upper = attr.interval(_LEVEL)
    positions = np.arange(attr.n_features)
    for panel, (axis, point, label) in enumerate(zip(axes, points, point_labels, strict=True)):
        mean = attr.mean[point]
        colours = [_POSITIVE if m >= 0 else _NEGATIVE for m in mean]
        xerr = None
        if attr.cov is not None:
            xerr = np.vstack([mean - lower[point], upper[point] - mean])
        axis.barh(
            positions, mean, xerr=xerr, color=colours, alpha=0.85,
            error_kw={"ecolor": "0.2", "capsize": 2.5, "elinewidth": 1.0},
        )
        axis.axvline(0.0, color="0.3", linewidth=0.8)
        if panel == 0 or ax is not None:  # new panels share the y axis: label the first
            axis.set_yticks(positions, [_plain(name) for name in attr.feature_names])
        if not axis.yaxis_inverted():
            axis.invert_yaxis()
        axis.set_xlabel(xlabel or "attribution (units of the target)")
        title = f"{_plain(label)}\nprediction {attr.prediction[point]:.4g}"
        if attr.baseline_prediction is not None:
            title += f" vs baseline {attr.baseline_prediction:.4g}"
        axis.set_title(title, fontsize="medium")
        axis.grid(axis="x", color="0.9", linewidth=0.6)
        axis.set_axisbelow(True)
    if ax is None:
        interval = "95% credible intervals" if attr.cov is not None else "no covariance"
        figure.suptitle(f"{attr.method}; error bars: {interval}", fontsize="small")
    return figure


def plot_global_importance(attr: Attribution, ax: Axes | None = None, *,
                           xlabel: str | None = None, importance=None) -> Figure:
    """Mean absolute attribution per feature over the explained points, with error bars.

    With the covariance across points (``attr.point_cov``, from ``return_cov="points"``) or
    a precomputed ``importance`` (``gx.GlobalImportance`` of summary ``mean_abs``), the bar is
    the posterior expectation of ``I_i = mean_p |a[p, i]|`` and the error bar ``+- 1.96`` times
    its exact posterior standard deviation (``gx.global_importance``: folded-normal moments
    over every pair of points), lower end clipped at zero. Without either, the bar is the
    plug-in ``mean_p |mean[p, i]|`` and no error bar is drawn: per-point standard deviations
    alone do not give the posterior of a sum over points. Features are sorted by the bar,
    most important at the top.

    Parameters
    ----------
    attr : Attribution
    ax : matplotlib Axes, optional
        Where to draw. Default: a new figure.
    xlabel : str, optional
        The x-axis label (the error bars' note is added below it). Default
        ``"mean |attribution| (units of the target)"``.
    importance : gx.GlobalImportance, optional
        Its ``mean`` and ``std`` are drawn (features in ``attr``'s order).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError
        ``attr`` is not an ``Attribution``.
    ValueError
        ``importance`` not of summary "mean_abs" or for other features.
    """
    attr = _check_attribution(attr)
    if importance is None and getattr(attr, "point_cov", None) is not None:
        from gpexplain.explain.global_importance import importance_of

        importance = importance_of(attr, "mean_abs", max_joint=1)  # moments only
    if importance is not None and (importance.summary != "mean_abs" or list(
            importance.feature_names) != list(attr.feature_names)):
        raise ValueError("importance must be the 'mean_abs' GlobalImportance of attr's features.")
    if importance is None:
        values, spread = np.mean(np.abs(attr.mean), axis=0), None
    else:
        values, spread = importance.mean, 1.96 * importance.std
    order = np.argsort(-values, kind="stable")
    figure, ax = _ranking_axes(attr.feature_names, ax)
    positions = np.arange(attr.n_features)
    xerr = None
    if spread is not None:
        xerr = np.vstack([np.minimum(spread[order], values[order]), spread[order]])
    ax.barh(
        positions, values[order], xerr=xerr, color="0.45", alpha=0.9,
        error_kw={"ecolor": "0.1", "capsize": 2.5, "elinewidth": 1.0},
    )
    _rank_rows(ax, [attr.feature_names[i] for i in order])
    label = xlabel or "mean |attribution| (units of the target)"
    if spread is not None:
        label += "\nposterior mean \u00b11.96 \u00d7 exact posterior std (over all points)"
    else:
        label += "\nno error bars: needs the covariance across points (return_cov='points')"
    ax.set_xlabel(label)
    ax.set_xlim(left=0.0)
    points = f"{attr.n_points} point" + ("s" if attr.n_points != 1 else "")
    ax.set_title(f"Global importance over {points}", fontsize="medium")
    return figure


def plot_global_shapley(result, ax: Axes | None = None) -> Figure:
    """Global Shapley values (Shapley effects) beside first-order Sobol variances, per feature.

    For an orthogonal additive GP, ``result.values[i]`` is feature i's share of the variance
    of the prediction under the product measure (the shares sum to ``total_variance``), and
    ``result.first_order[i]`` is the variance of its main effect alone. The gap between the two
    bars is what feature i's interactions add. Features are sorted by Shapley effect, most
    important at the top.

    Parameters
    ----------
    result : GlobalShapleyValues
        From ``gx.global_shapley_values``.
    ax : matplotlib Axes, optional
        Where to draw. Default: a new figure.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError
        ``result`` lacks ``values``, ``first_order``, ``total_variance`` or ``feature_names``.
    """
    missing = [
        name
        for name in ("values", "first_order", "total_variance", "feature_names")
        if not hasattr(result, name)
    ]
    if missing:
        raise TypeError(
            f"result must be a GlobalShapleyValues (from gx.global_shapley_values); "
            f"{type(result).__name__} has no {', '.join(missing)}."
        )
    values = np.asarray(result.values, dtype=np.float64)
    first_order = np.asarray(result.first_order, dtype=np.float64)
    names = list(result.feature_names)
    order = np.argsort(-values, kind="stable")
    figure, ax = _ranking_axes(names, ax)
    positions = np.arange(len(names))
    ax.barh(positions - 0.2, values[order], height=0.4, color="0.35", label="Shapley effect")
    ax.barh(
        positions + 0.2, first_order[order], height=0.4, color="0.7",
        label="first-order (main effect only)",
    )
    _finish_variance_panel(
        ax, [names[i] for i in order],
        "variance of the prediction (squared units of the target)",
        f"Global Shapley values (total variance {float(result.total_variance):.4g})",
    )
    return figure


def _finish_variance_panel(ax: Axes, ranked_names: list[str], xlabel: str, title: str) -> None:
    """Row labels, axis label, title and legend of a per-feature variance bar chart."""
    _rank_rows(ax, ranked_names)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize="medium")
    ax.legend(fontsize="small", loc="lower right")


def plot_global_sensitivity(result, ax: Axes | None = None) -> Figure:
    """First-order, Shapley and total variances per feature, with posterior error bars.

    Bars are posterior expectations over the GP (``result.expected_*``, squared units of the
    target), each with +-1.96 posterior standard deviations (``result.first_order_std``,
    ``total_std``, ``shapley_effects_std``; the lower bar cut at zero, as a variance is >= 0);
    dots mark the same quantities of the posterior mean. The title gives the variance of the
    posterior mean and the posterior expectation and std of ``Var f``.
    Features are sorted by expected Shapley effect, most important at the top.

    Parameters
    ----------
    result : GlobalSensitivity
        From ``gx.global_sensitivity``.
    ax : matplotlib Axes, optional
        Drawn into when given (else a new figure).

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn on; a ``TypeError`` is raised instead when ``result`` is not a
        ``GlobalSensitivity``.
    """
    if not isinstance(result, GlobalSensitivity):
        raise TypeError(
            "result must be a GlobalSensitivity (from gx.global_sensitivity), got "
            f"{type(result).__name__}."
        )
    names = list(result.feature_names)
    order = np.argsort(-result.expected_shapley_effects, kind="stable")
    figure, ax = _ranking_axes(names, ax)
    positions = np.arange(len(names))
    rows = (
        ("first order", result.expected_first_order, result.first_order, result.first_order_std,
         "0.75", -0.27),
        ("Shapley effect", result.expected_shapley_effects, result.shapley_effects,
         result.shapley_effects_std, "0.45", 0.0),
        ("total", result.expected_total, result.total, result.total_std, "0.15", 0.27),
    )
    for label, expected, of_mean, std, colour, offset in rows:
        half = 1.96 * std[order]
        error = np.stack([np.minimum(half, np.maximum(expected[order], 0.0)), half])
        ax.barh(positions + offset, expected[order], height=0.27, color=colour, xerr=error,
                error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "tab:red"},
                label=f"{label} (posterior expectation +- 1.96 std)")
        ax.plot(of_mean[order], positions + offset, "o", color="black", markersize=2.5)
    _finish_variance_panel(
        ax, [names[i] for i in order],
        "variance (squared units of the target); dots: of the posterior mean",
        f"Global sensitivity (variance of the posterior mean {result.total_variance:.4g}; "
        f"over the posterior {result.expected_total_variance:.4g} "
        f"+- {result.total_variance_std:.2g})",
    )
    return figure


def _point_position(attr: Attribution, point) -> int:
    point = int(point)
    if not 0 <= point < attr.n_points:
        raise ValueError(
            f"point {point} out of range; the attribution has {attr.n_points} points "
            f"(positions 0 to {attr.n_points - 1})."
        )
    return point


def _feature_position(attr: Attribution, feature) -> int:
    if isinstance(feature, str):
        if feature not in attr.feature_names:
            raise ValueError(f"unknown feature {feature!r}; the features are {attr.feature_names}.")
        return attr.feature_names.index(feature)
    position = int(feature)
    if not 0 <= position < attr.n_features:
        raise ValueError(
            f"feature {position} out of range; the attribution has {attr.n_features} features."
        )
    return position


def _is_numeric(values: np.ndarray) -> bool:
    """True when every value is a number (booleans count as 0/1); category labels are not."""
    values = np.asarray(values)
    if np.issubdtype(values.dtype, np.number) or values.dtype == bool:
        return True
    return all(isinstance(v, int | float | np.number | np.bool_) for v in values)


def plot_waterfall(
    attr: Attribution, point: int = 0, max_features: int = 10, ax: Axes | None = None
) -> Figure:
    """Waterfall of one point: from the baseline prediction, each feature's attribution in
    turn, to the prediction, every step with its 95% credible interval.

    Steps are sorted by ``|mean|``, largest at the top; features beyond ``max_features`` are
    merged into one step ``"k other features"`` whose mean is the sum of theirs and whose
    variance is the sum of their covariance block ``1^T C_block 1`` (the exact variance of the
    sum, correlations included). Each bar runs from the running total before the step to the
    one after it; by completeness the last bar ends at the prediction. The error bar of a step
    is ``+- 1.96 sd`` of that step alone, drawn at its end.

    Parameters
    ----------
    attr : Attribution
        Needs a base value (``attr.baseline_prediction``): integrated gradients, Shapley
        values, GPX contributions.
    point : int, default 0
        Position of the explained point.
    max_features : int, default 10
        Steps drawn individually (at least 1).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError
        ``attr`` is not an ``Attribution``.
    ValueError
        No base value, ``point`` out of range or ``max_features < 1``.
    """
    attr = _check_attribution(attr)
    point = _point_position(attr, point)
    if attr.baseline_prediction is None:
        raise ValueError(
            "a waterfall starts at the base value; this attribution has none "
            f"({attr.method}); use plot_attributions."
        )
    if int(max_features) < 1:
        raise ValueError(f"max_features must be at least 1, got {max_features}.")
    mean = attr.mean[point]
    deterministic = _deterministic(attr)
    order = list(np.argsort(-np.abs(mean), kind="stable"))
    shown, rest = order[: int(max_features)], order[int(max_features):]
    names = [attr.feature_names[i] for i in shown]
    steps = [float(mean[i]) for i in shown]
    variances = [float(attr.var[point, i]) for i in shown]
    if rest:
        names.append(f"{len(rest)} other features")
        steps.append(float(mean[rest].sum()))
        block = attr.cov[point][np.ix_(rest, rest)] if attr.cov is not None else np.zeros((1, 1))
        variances.append(max(float(block.sum()), 0.0))
    starts = float(attr.baseline_prediction) + np.concatenate([[0.0], np.cumsum(steps)[:-1]])
    steps = np.asarray(steps)
    half = norm.ppf(0.5 + _LEVEL / 2.0) * np.sqrt(variances)
    figure, ax = _ranking_axes(names, ax)
    positions = np.arange(len(names))
    ax.barh(
        positions, steps, left=starts, color=[_POSITIVE if v >= 0 else _NEGATIVE for v in steps],
        alpha=0.85,
    )
    if attr.cov is not None and deterministic is None:
        ax.errorbar(
            starts + steps, positions, xerr=half, fmt="none", ecolor="0.2", capsize=2.5,
            elinewidth=1.0,
        )
    ax.axvline(float(attr.baseline_prediction), color="0.5", linestyle=":", linewidth=0.9)
    ax.axvline(float(attr.prediction[point]), color="0.2", linestyle="--", linewidth=0.9)
    _rank_rows(ax, names)
    if deterministic is None:
        ax.set_xlabel("prediction (units of the target); error bars: 95% credible intervals")
        end = "prediction"
    else:
        what, units = deterministic
        ax.set_xlabel(f"{what} ({units}); a deterministic function: no intervals")
        end = what
    ax.set_title(
        f"point {point}: baseline {float(attr.baseline_prediction):.4g} "
        f"\u2192 {end} {float(attr.prediction[point]):.4g}",
        fontsize="medium",
    )
    return figure


def plot_summary(attr: Attribution, max_features: int = 20, ax: Axes | None = None) -> Figure:
    """Beeswarm-like summary: every point's attribution of every feature, with its interval.

    One row per feature, sorted by mean ``|attribution|`` (most important at the top; the
    first ``max_features`` rows). Each explained point is a dot at its posterior mean, spread
    vertically within the row by a deterministic offset (its rank in the row) so dots do not
    hide each other, with a thin horizontal bar spanning its 95% credible interval. Dots are
    coloured by the feature's value, scaled to its range over the points (blue low, red
    high); categorical values (labels) are drawn grey.

    Parameters
    ----------
    attr : Attribution
    max_features : int, default 20
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError
        ``attr`` is not an ``Attribution``.
    ValueError
        ``max_features < 1``.
    """
    attr = _check_attribution(attr)
    if int(max_features) < 1:
        raise ValueError(f"max_features must be at least 1, got {max_features}.")
    order = np.argsort(-np.mean(np.abs(attr.mean), axis=0), kind="stable")[: int(max_features)]
    names = [attr.feature_names[i] for i in order]
    figure, ax = _ranking_axes(names, ax)
    lower, upper = attr.interval(_LEVEL)
    colour_map = matplotlib.colormaps["coolwarm"]
    for row, feature in enumerate(order):
        means = attr.mean[:, feature]
        ranks = np.argsort(np.argsort(means, kind="stable"), kind="stable")
        offsets = row + 0.6 * (ranks / max(attr.n_points - 1, 1) - 0.5)
        values = attr.X[:, feature]
        if _is_numeric(values):
            numbers = np.asarray(values, dtype=np.float64)
            span = np.ptp(numbers)
            scaled = (numbers - numbers.min()) / span if span > 0 else np.full(len(numbers), 0.5)
            colours = colour_map(scaled)
        else:
            colours = np.tile([0.5, 0.5, 0.5, 1.0], (attr.n_points, 1))
        if attr.cov is not None and _deterministic(attr) is None:
            ax.hlines(offsets, lower[:, feature], upper[:, feature], colors="0.75",
                      linewidth=0.8, zorder=1)
        ax.scatter(means, offsets, c=colours, s=14, zorder=2, edgecolors="none")
    ax.axvline(0.0, color="0.3", linewidth=0.8)
    _rank_rows(ax, names)
    deterministic = _deterministic(attr)
    scale = ("attribution (units of the target); bars: 95% credible intervals"
             if deterministic is None else
             f"attribution of the {deterministic[0]} ({deterministic[1]}); deterministic")
    ax.set_xlabel(f"{scale}\ncolour: feature value, low (blue) to high (red); grey: categorical")
    subject = "" if deterministic is None else f" of the {deterministic[0]}"
    ax.set_title(f"Attributions{subject} at {attr.n_points} points" if subject
                 else f"Attributions of {attr.n_points} points", fontsize="medium")
    return figure


def simultaneous_band_factor(cov: np.ndarray, level: float = _LEVEL, n_samples: int = 4000,
                             random_state=0) -> float:
    """``c`` such that ``mean +- c sd`` holds a draw of ``N(mean, cov)`` at every point at once
    with probability ``level``: the ``level`` quantile of ``max_p |a_p - mean_p| / sd_p`` over
    ``n_samples`` joint draws (a simultaneous band; ``c >= 1.96`` at 95%, up to Monte Carlo
    error about ``0.01 c``). Points with zero sd are ignored."""
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    keep = sd > 0
    if not keep.any():
        return 0.0
    values, vectors = np.linalg.eigh(cov[np.ix_(keep, keep)])
    root = vectors * np.sqrt(np.clip(values, 0.0, None))
    draws = np.random.default_rng(random_state).standard_normal((n_samples, len(values)))
    largest = np.max(np.abs(draws @ root.T) / sd[keep], axis=1)
    return float(np.quantile(largest, level))


def plot_dependence(attr: Attribution, feature, ax: Axes | None = None) -> Figure:
    """Attribution of one feature against its value, with the 95% credible band.

    For a numeric feature the points are sorted by value; the dots are the posterior means.
    With the covariance across points (``attr.point_cov``, ``return_cov="points"``) the band
    is **simultaneous**: ``mean +- c sd`` with ``c`` from joint posterior draws of the
    attribution function over the points (``simultaneous_band_factor``), so that a whole
    posterior curve lies inside it with probability 95%; the pointwise band ``mean +- 1.96 sd``
    is drawn inside it. Without it, only the pointwise band is drawn.
    For a categorical feature (labels) each category gets one column of dots with error bars.

    Parameters
    ----------
    attr : Attribution
    feature : str or int
        Name or position of the feature.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError
        ``attr`` is not an ``Attribution``.
    ValueError
        Unknown feature.
    """
    attr = _check_attribution(attr)
    j = _feature_position(attr, feature)
    name = _plain(attr.feature_names[j])
    if ax is None:
        figure = Figure(figsize=(5.2, 3.6), layout="constrained")
        ax = figure.subplots()
    else:
        figure = ax.figure
    lower, upper = attr.interval(_LEVEL)
    values = attr.X[:, j]
    if _is_numeric(values):
        x = np.asarray(values, dtype=np.float64)
        order = np.argsort(x, kind="stable")
        if getattr(attr, "point_cov", None) is not None:
            c = simultaneous_band_factor(attr.point_cov.feature_matrix(j))
            half = c * attr.std[:, j]
            ax.fill_between(x[order], (attr.mean[:, j] - half)[order],
                            (attr.mean[:, j] + half)[order], color=_NEGATIVE, alpha=0.12,
                            linewidth=0, label=f"simultaneous 95% band (\u00b1{c:.2f} sd)")
        if attr.cov is not None:
            ax.fill_between(x[order], lower[order, j], upper[order, j], color=_NEGATIVE,
                            alpha=0.2, linewidth=0, label="95% credible interval (pointwise)")
        ax.plot(x[order], attr.mean[order, j], "o", color=_NEGATIVE, markersize=3.5,
                label="posterior mean")
        ax.set_xlabel(f"{name} (value)")
    else:
        labels = [str(v) for v in values]
        categories = sorted(set(labels))
        x = np.array([categories.index(label) for label in labels], dtype=np.float64)
        yerr = np.vstack([attr.mean[:, j] - lower[:, j], upper[:, j] - attr.mean[:, j]])
        ax.errorbar(x, attr.mean[:, j], yerr=yerr if attr.cov is not None else None,
                    fmt="o", color=_NEGATIVE, markersize=3.5, ecolor="0.6", elinewidth=0.8,
                    label="posterior mean, 95% interval")
        ax.set_xticks(np.arange(len(categories)), [_plain(c) for c in categories])
        ax.set_xlabel(f"{name} (category)")
    ax.axhline(0.0, color="0.3", linewidth=0.8)
    ax.set_ylabel(f"attribution of {name}\n(units of the target)")
    ax.set_title(f"Dependence: {name}", fontsize="medium")
    ax.legend(fontsize="small")
    return figure


def _check_interactions(result):
    from gpexplain.interactions import ShapleyInteractions

    if not isinstance(result, ShapleyInteractions):
        raise TypeError(
            f"result must be gpexplain ShapleyInteractions (from gx.shapley_interactions), got "
            f"{type(result).__name__}."
        )
    return result


def plot_interactions(result, point: int | None = None, ax: Axes | None = None) -> Figure:
    """Heatmap of the pairwise Shapley interactions, uncertain pairs marked.

    At one point (``point`` given), cell ``(i, j)`` is the posterior mean of the pair's
    interaction (diverging colours, signed), and a dot marks a pair whose 95% credible interval
    ``mean +- 1.96 sd`` contains zero. Over all points (``point`` None), the cell is the mean
    over the points of ``|posterior mean|`` (signed values of opposite sign would cancel), and
    a dot marks a pair whose 95% interval contains zero at every point. Without a covariance
    nothing is marked.

    Parameters
    ----------
    result : ShapleyInteractions
    point : int, optional
        Position of the point; None summarises all points.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError
        ``result`` is not ``ShapleyInteractions``.
    ValueError
        ``point`` out of range.
    """
    result = _check_interactions(result)
    if point is not None:
        point = _point_position(result, point)
    rows = slice(None) if point is None else slice(point, point + 1)
    mean = result.matrix("mean")[rows]
    half = norm.ppf(0.5 + _LEVEL / 2.0) * result.matrix("std")[rows]
    d = result.n_features
    if ax is None:
        side = 2.4 + 0.42 * d
        figure = Figure(figsize=(side + 1.2, side), layout="constrained")
        ax = figure.subplots()
    else:
        figure = ax.figure
    if point is None:
        shown = np.abs(mean).mean(axis=0)
        image = ax.imshow(shown, cmap="Reds", vmin=0.0, vmax=max(float(shown.max()), 1e-300))
        label = f"mean |{result.index} interaction| (units of the target)"
    else:
        shown = mean[0]
        limit = max(float(np.abs(shown).max()), 1e-300)
        image = ax.imshow(shown, cmap="RdBu_r", vmin=-limit, vmax=limit)
        label = f"{result.index} interaction (units of the target)"
    figure.colorbar(image, ax=ax, label=label)
    if result.cov is not None:
        uncertain = np.all(np.abs(mean) <= half, axis=0) & ~np.eye(d, dtype=bool)
        marked_rows, marked_cols = np.nonzero(uncertain)
        what = "95% interval contains 0" + (" at every point" if point is None else "")
        ax.plot(marked_cols, marked_rows, "o", color="0.35", markersize=3.0, linestyle="none",
                label=what)
        if marked_rows.size:
            ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(0.0, -0.12))
    names = [_plain(name) for name in result.feature_names]
    ax.set_xticks(np.arange(d), names, rotation=60, ha="right")
    ax.set_yticks(np.arange(d), names)
    where = f"point {point}" if point is not None else f"{result.n_points} points"
    ax.set_title(f"Pairwise interactions ({where})", fontsize="medium")
    return figure


def plot_interaction_dependence(result, feature, ax: Axes | None = None) -> Figure:
    """Order-1 value of a feature against its value, coloured by its strongest partner.

    The partner is the feature j with the largest mean ``|interaction_ij|`` over the points;
    the dots are posterior means with 95% error bars, coloured by the partner's value.

    Parameters
    ----------
    result : ShapleyInteractions
    feature : str or int
        Name or position of the feature (numeric values).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError
        ``result`` is not ``ShapleyInteractions``.
    ValueError
        Unknown feature, or a result with one feature (no partner).
    """
    result = _check_interactions(result)
    i = _feature_position(result, feature)
    if result.n_features < 2:
        raise ValueError("plot_interaction_dependence needs at least two features.")
    strength = np.abs(result.matrix("mean")).mean(axis=0)[i]
    strength[i] = -1.0
    j = int(np.argmax(strength))
    if ax is None:
        figure = Figure(figsize=(5.8, 3.6), layout="constrained")
        ax = figure.subplots()
    else:
        figure = ax.figure
    x = np.asarray(result.X[:, i], dtype=np.float64)
    values, errors = result.main_effects()[:, i], norm.ppf(0.5 + _LEVEL / 2.0) * result.std[:, i]
    ax.errorbar(x, values, yerr=errors if result.cov is not None else None, fmt="none",
                ecolor="0.7", elinewidth=0.8)
    points = ax.scatter(x, values, c=np.asarray(result.X[:, j], dtype=np.float64),
                        cmap="viridis", s=14, zorder=3)
    figure.colorbar(points, ax=ax, label=f"{_plain(result.feature_names[j])} (value)")
    name = _plain(result.feature_names[i])
    ax.axhline(0.0, color="0.3", linewidth=0.8)
    ax.set_xlabel(f"{name} (value)")
    ax.set_ylabel(f"{result.index} order-1 value of {name}\n(units of the target)")
    ax.set_title(f"Dependence: {name}, coloured by strongest partner", fontsize="medium")
    return figure
