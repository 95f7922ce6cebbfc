"""Figures of attributions: structure, error-bar lengths and argument checks."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure

import gpexplain as gx
from gpexplain.attribution import Attribution
from gpexplain.plot import plot_attributions, plot_global_importance

NAMES = ["a", "b", "c"]


def attr_posterior():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 3))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1]
    return gx.ExactPosterior(
        X, y, gx.kernels.RBF([1.0, 1.5, 2.0], 1.0), 0.01, feature_names=NAMES
    )


@pytest.fixture(scope="module")
def attr() -> Attribution:
    posterior = attr_posterior()
    return gx.integrated_gradients(posterior, posterior.train_inputs[:6])


def _error_segments(axis):
    """Horizontal error-bar segments of a barh plot, top to bottom by y."""
    (container,) = [c for c in axis.containers if isinstance(c, ErrorbarContainer)]
    return sorted(container.lines[2][0].get_segments(), key=lambda s: s[0][1])


def _bars(axis):
    return sorted(axis.patches, key=lambda patch: patch.get_y())


def test_plot_attributions_default_panels(attr, tmp_path):
    figure = plot_attributions(attr)
    assert isinstance(figure, Figure)
    assert len(figure.axes) == 4
    first = figure.axes[0]
    assert [t.get_text() for t in first.get_yticklabels()] == NAMES
    widths = [patch.get_width() for patch in _bars(first)]
    np.testing.assert_allclose(widths, attr.mean[0])
    assert "prediction" in first.get_title() and "baseline" in first.get_title()
    figure.savefig(tmp_path / "attributions.png")
    assert (tmp_path / "attributions.png").stat().st_size > 0


def test_plot_attributions_error_bars_are_95_percent_intervals(attr):
    figure = plot_attributions(attr, points=[2])
    (axis,) = figure.axes
    lower, upper = attr.interval(0.95)
    for feature, segment in enumerate(_error_segments(axis)):
        np.testing.assert_allclose(sorted(segment[:, 0]), [lower[2, feature], upper[2, feature]])


def test_plot_attributions_labels_and_axes(attr):
    figure = plot_attributions(attr, points=[1, 3], point_labels=["row 10", "row 30"])
    assert figure.axes[1].get_title().startswith("row 30")
    target = Figure()
    axes = target.subplots(1, 2)
    assert plot_attributions(attr, points=[0, 5], ax=axes) is target


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"points": [6]}, "out of range"),
        ({"points": []}, "empty"),
        ({"max_points": 0}, "max_points"),
        ({"points": [0, 1], "point_labels": ["x"]}, "point_labels"),
    ],
)
def test_plot_attributions_rejects_bad_arguments(attr, kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        plot_attributions(attr, **kwargs)


def test_plot_attributions_rejects_wrong_axes_and_types(attr):
    axis = Figure().subplots()
    with pytest.raises(ValueError, match="one Axes per point"):
        plot_attributions(attr, ax=axis)
    with pytest.raises(TypeError, match="Attribution"):
        plot_attributions(attr.mean)


def test_plot_global_importance_exact_bars_against_monte_carlo(attr):
    """With the covariance across points, bar = E[mean_p |a_pi|] and error bar = 1.96 x its
    posterior std; expected values from draws of the joint Gaussian (|z| < 5)."""
    points = gx.integrated_gradients(attr_posterior(), attr.X, return_cov="points")
    figure = plot_global_importance(points)
    (axis,) = figure.axes
    dense = points.point_cov.dense().reshape(points.mean.size, -1)
    draws = np.random.default_rng(2).multivariate_normal(
        points.mean.ravel(), dense, size=200_000, method="eigh")
    importance = np.abs(draws.reshape(len(draws), *points.mean.shape)).mean(axis=1)
    expected, std = importance.mean(0), importance.std(0)
    order = np.argsort(-expected)
    assert [t.get_text() for t in axis.get_yticklabels()] == [NAMES[i] for i in order]
    widths = np.array([patch.get_width() for patch in _bars(axis)])
    assert np.all(np.abs(widths - expected[order]) < 5 * std[order] / np.sqrt(len(draws)))
    for segment, bar, sd in zip(_error_segments(axis), widths, std[order], strict=True):
        low, high = sorted(segment[:, 0])
        assert (high - bar) / 1.96 == pytest.approx(sd, rel=0.02)  # MC: 0.3% se on an sd
        assert low == pytest.approx(max(bar - (high - bar), 0.0))
    assert "exact posterior std" in axis.get_xlabel()


def test_plot_global_importance_without_point_covariance_has_no_error_bars(attr):
    figure = plot_global_importance(attr)
    (axis,) = figure.axes
    importance = np.mean(np.abs(attr.mean), axis=0)
    order = np.argsort(-importance)
    assert [t.get_text() for t in axis.get_yticklabels()] == [NAMES[i] for i in order]
    np.testing.assert_allclose([p.get_width() for p in _bars(axis)], importance[order])
    assert not [c for c in axis.containers if isinstance(c, ErrorbarContainer)]
    assert "return_cov='points'" in axis.get_xlabel()


def test_plots_without_covariance(attr):
    mean_only = Attribution(
        mean=attr.mean,
        cov=None,
        X=attr.X,
        prediction=attr.prediction,
        baseline=None,
        baseline_prediction=None,
        feature_names=NAMES,
        method="test",
    )
    figure = plot_attributions(mean_only, points=[0])
    assert "baseline" not in figure.axes[0].get_title()
    assert isinstance(plot_global_importance(mean_only), Figure)


def test_plot_global_shapley_bars_sorted_by_shapley_effect(tmp_path):
    from types import SimpleNamespace

    from gpexplain.plot import plot_global_shapley

    result = SimpleNamespace(
        values=np.array([0.2, 1.5, 0.7]),
        first_order=np.array([0.1, 1.2, 0.7]),
        total_variance=2.4,
        feature_names=NAMES,
    )
    figure = plot_global_shapley(result)
    (axis,) = figure.axes
    assert [t.get_text() for t in axis.get_yticklabels()] == ["b", "c", "a"]
    bars = _bars(axis)  # sorted by y: Shapley bar then first-order bar of each feature
    np.testing.assert_allclose([b.get_width() for b in bars[0::2]], [1.5, 0.7, 0.2])
    np.testing.assert_allclose([b.get_width() for b in bars[1::2]], [1.2, 0.7, 0.1])
    assert "2.4" in axis.get_title()
    figure.savefig(tmp_path / "global.png")


def test_plot_global_shapley_rejects_other_objects(attr):
    from gpexplain.plot import plot_global_shapley

    with pytest.raises(TypeError, match="GlobalShapleyValues"):
        plot_global_shapley(attr)


def test_dollar_signs_in_names_and_labels_are_drawn_as_text():
    import io

    from gpexplain.plot import plot_dependence, plot_summary, plot_waterfall

    names = ["price $^$", "cost $"]  # an invalid and an unbalanced mathtext
    X = np.array([["$x^$", 1.0], ["b", 2.0]], dtype=object)
    attr = Attribution(mean=np.array([[0.5, -0.2], [0.1, 0.3]]),
                       cov=np.tile(np.eye(2) * 0.01, (2, 1, 1)), X=X,
                       prediction=np.array([1.3, 1.4]), baseline=None, baseline_prediction=1.0,
                       feature_names=names, method="test")
    figures = [plot_attributions(attr, point_labels=["row $^$", "row 2"]),
               plot_global_importance(attr), plot_summary(attr), plot_waterfall(attr, 0),
               plot_dependence(attr, 0)]
    for figure in figures:
        figure.savefig(io.BytesIO(), format="png")
    labels = [t.get_text() for t in figures[1].axes[0].get_yticklabels()]
    assert sorted(labels) == sorted(name.replace("$", r"\$") for name in names)
