"""Waterfall, summary (beeswarm-like) and dependence plots: the drawn values are read back
from the figure and compared with the ``Attribution`` they were drawn from."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.collections import LineCollection, PathCollection, PolyCollection
from matplotlib.container import ErrorbarContainer
from scipy.stats import norm

import gpexplain as gx
from gpexplain.attribution import Attribution
from gpexplain.plot import plot_dependence, plot_summary, plot_waterfall

Z = norm.ppf(0.975)


@pytest.fixture(scope="module")
def attr() -> Attribution:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 5))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] - X[:, 2] * X[:, 3]
    posterior = gx.ExactPosterior(
        X, y, gx.kernels.RBF([1.0, 1.5, 2.0, 1.2, 3.0], 1.0), 0.01,
        feature_names=["a", "b", "c", "d", "e"],
    )
    return gx.integrated_gradients(posterior, X[:8])


def _bars(axis):
    return sorted(axis.patches, key=lambda patch: patch.get_y())


def test_waterfall_steps_run_from_baseline_to_prediction(attr):
    point = 2
    axis = plot_waterfall(attr, point=point).axes[0]
    bars = _bars(axis)  # top to bottom after the inverted y axis: sorted by y
    order = np.argsort(-np.abs(attr.mean[point]), kind="stable")
    widths = np.array([bar.get_width() for bar in bars])
    np.testing.assert_allclose(widths, attr.mean[point, order], rtol=1e-12)
    lefts = np.array([bar.get_x() for bar in bars])
    np.testing.assert_allclose(lefts[0], attr.baseline_prediction, rtol=1e-12)
    np.testing.assert_allclose(lefts[1:], lefts[:-1] + widths[:-1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lefts[-1] + widths[-1], attr.prediction[point], atol=1e-9)
    labels = [t.get_text() for t in axis.get_yticklabels()]
    assert labels == [attr.feature_names[i] for i in order]
    (container,) = [c for c in axis.containers if isinstance(c, ErrorbarContainer)]
    segments = sorted(container.lines[2][0].get_segments(), key=lambda s: s[0][1])
    half = np.array([(s[1][0] - s[0][0]) / 2 for s in segments])
    np.testing.assert_allclose(half, Z * attr.std[point, order], rtol=1e-10)


def test_waterfall_merges_the_rest_with_the_block_variance(attr):
    axis = plot_waterfall(attr, point=0, max_features=2).axes[0]
    order = np.argsort(-np.abs(attr.mean[0]), kind="stable")
    rest = order[2:]
    bars = _bars(axis)
    assert len(bars) == 3
    assert [t.get_text() for t in axis.get_yticklabels()][-1] == "3 other features"
    assert bars[-1].get_width() == pytest.approx(attr.mean[0, rest].sum(), rel=1e-12)
    (container,) = [c for c in axis.containers if isinstance(c, ErrorbarContainer)]
    segment = max(container.lines[2][0].get_segments(), key=lambda s: s[0][1])
    variance = sum(attr.cov[0, i, j] for i in rest for j in rest)  # brute-force block sum
    assert (segment[1][0] - segment[0][0]) / 2 == pytest.approx(Z * np.sqrt(variance), rel=1e-10)


def test_summary_dots_are_the_means_with_their_intervals(attr):
    axis = plot_summary(attr).axes[0]
    importance = np.mean(np.abs(attr.mean), axis=0)
    order = np.argsort(-importance, kind="stable")
    dots = [c for c in axis.collections if isinstance(c, PathCollection)]
    bars = [c for c in axis.collections if isinstance(c, LineCollection)]
    assert len(dots) == len(bars) == attr.n_features
    lower, upper = attr.interval(0.95)
    for row, (feature, scatter, lines) in enumerate(zip(order, dots, bars, strict=True)):
        offsets = scatter.get_offsets()
        np.testing.assert_allclose(offsets[:, 0], attr.mean[:, feature], rtol=1e-12)
        assert np.all(np.abs(offsets[:, 1] - row) <= 0.3 + 1e-12)  # inside its row
        ends = np.array([[s[0][0], s[1][0]] for s in lines.get_segments()])
        np.testing.assert_allclose(ends[:, 0], lower[:, feature], rtol=1e-12)
        np.testing.assert_allclose(ends[:, 1], upper[:, feature], rtol=1e-12)
    assert [t.get_text() for t in axis.get_yticklabels()] == [
        attr.feature_names[i] for i in order
    ]


def test_dependence_band_is_the_pointwise_interval(attr):
    axis = plot_dependence(attr, "b").axes[0]
    j = 1
    order = np.argsort(attr.X[:, j])
    (line,) = [line for line in axis.lines if line.get_marker() == "o"]
    np.testing.assert_allclose(line.get_xdata(), attr.X[order, j])
    np.testing.assert_allclose(line.get_ydata(), attr.mean[order, j], rtol=1e-12)
    (band,) = [c for c in axis.collections if isinstance(c, PolyCollection)]
    vertices = band.get_paths()[0].vertices
    lower, upper = attr.interval(0.95)
    for x, low, high in zip(attr.X[order, j], lower[order, j], upper[order, j], strict=True):
        at_x = vertices[np.isclose(vertices[:, 0], x)][:, 1]
        assert np.any(np.isclose(at_x, low)) and np.any(np.isclose(at_x, high))


def test_dependence_of_a_categorical_feature():
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(6, 2))
    cov = np.einsum("pi,ij->pij", np.ones((6, 2)), np.eye(2)) * 0.04
    labels = np.array([["M", 1.0], ["F", 2.0], ["M", 3.0], ["I", 4.0], ["F", 5.0], ["I", 6.0]],
                      dtype=object)
    attr = Attribution(mean, cov, labels, mean.sum(1), None, 0.0, ["sex", "w"], "test")
    axis = plot_dependence(attr, 0).axes[0]
    assert [t.get_text() for t in axis.get_xticklabels()] == ["F", "I", "M"]
    (container,) = [c for c in axis.containers if isinstance(c, ErrorbarContainer)]
    x, y = container.lines[0].get_data()
    np.testing.assert_array_equal(x, [2, 0, 2, 1, 0, 1])
    np.testing.assert_allclose(y, mean[:, 0])
    summary = plot_summary(attr).axes[0]  # labels are drawn grey, numbers coloured
    grey = [c for c in summary.collections if isinstance(c, PathCollection)]
    assert any(np.allclose(c.get_facecolors()[:, :3], 0.5) for c in grey)


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda a: plot_waterfall(a, point=8), "point 8 out of range"),
        (lambda a: plot_waterfall(a, max_features=0), "max_features"),
        (lambda a: plot_summary(a, max_features=0), "max_features"),
        (lambda a: plot_dependence(a, "z"), "unknown feature 'z'"),
        (lambda a: plot_dependence(a, 5), "feature 5 out of range"),
    ],
)
def test_bad_arguments_are_named(attr, call, fragment):
    with pytest.raises(ValueError, match=fragment):
        call(attr)


def test_waterfall_needs_a_base_value(attr):
    from dataclasses import replace

    with pytest.raises(ValueError, match="base value"):
        plot_waterfall(replace(attr, baseline_prediction=None))
    with pytest.raises(TypeError, match="Attribution"):
        plot_summary(attr.mean)
