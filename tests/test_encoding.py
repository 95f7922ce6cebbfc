"""Categorical and mixed columns: ``Attribution.group``, ``CategoricalEncoder``,
``make_pipeline`` and the command line on tables with text columns."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import gpexplain as gx
from gpexplain.attribution import Attribution
from gpexplain.cli import app
from gpexplain.datasets import read_table
from gpexplain.encoding import CategoricalEncoder
from gpexplain.models import GPRegressor
from tests.test_cli import one_start

runner = CliRunner()


def _random_attribution(n_points=3, n_features=5, seed=0) -> Attribution:
    rng = np.random.default_rng(seed)
    root = rng.normal(size=(n_points, n_features, n_features))
    cov = root @ root.transpose(0, 2, 1)
    mean = rng.normal(size=(n_points, n_features))
    baseline_prediction = 0.7
    return Attribution(
        mean=mean, cov=cov, X=rng.normal(size=(n_points, n_features)),
        prediction=mean.sum(axis=1) + baseline_prediction, baseline=rng.normal(size=n_features),
        baseline_prediction=baseline_prediction, feature_names=[f"f{i}" for i in range(5)],
        method="test", difference_variance=cov.sum(axis=(1, 2)),
    )


def _mixed_frame(n_rows=36, seed=2) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "a": rng.uniform(-2, 2, n_rows),
            "colour": rng.choice(["red", "green", "blue"], n_rows),
            "n": rng.integers(0, 4, n_rows),
            "flag": rng.random(n_rows) < 0.5,
        }
    )
    effect = X["colour"].map({"red": 1.0, "green": -0.5, "blue": 0.0})
    y = np.sin(X["a"]) + effect + 0.2 * X["n"] + 0.05 * rng.normal(size=n_rows)
    return X, pd.Series(y, name="y")


# -- Attribution.group ---------------------------------------------------------------------
def test_group_is_the_block_sum_of_means_and_covariances():
    attr = _random_attribution()
    groups = {"g": ["f1", "f3"], "h": ["f4", "f0"]}
    grouped = attr.group(groups, X=np.arange(9).reshape(3, 3))
    assert grouped.feature_names == ["h", "g", "f2"]  # order of first members
    blocks = [["f4", "f0"], ["f1", "f3"], ["f2"]]
    index = [[attr.feature_names.index(f) for f in block] for block in blocks]
    for p in range(attr.n_points):  # brute force, one entry at a time
        for g, members in enumerate(index):
            assert grouped.mean[p, g] == pytest.approx(sum(attr.mean[p, i] for i in members))
            for h, others in enumerate(index):
                expected = sum(attr.cov[p, i, j] for i in members for j in others)
                assert grouped.cov[p, g, h] == pytest.approx(expected, rel=1e-12, abs=1e-12)
    gaps = grouped.completeness_gap()
    assert gaps["mean"] < 1e-12 and gaps["variance"] < 1e-10
    assert grouped.baseline is None and grouped.baseline_prediction == attr.baseline_prediction


def test_group_everything_into_one_is_the_prediction_difference():
    attr = _random_attribution(seed=4)
    whole = attr.group({"all": attr.feature_names}, X=np.zeros((3, 1)))
    np.testing.assert_allclose(whole.mean[:, 0], attr.prediction - attr.baseline_prediction)
    np.testing.assert_allclose(whole.cov[:, 0, 0], attr.difference_variance, rtol=1e-12)


def test_single_member_groups_rename_and_keep_values():
    attr = _random_attribution(seed=5)
    renamed = attr.group({"first": ["f0"]})
    assert renamed.feature_names == ["first", "f1", "f2", "f3", "f4"]
    np.testing.assert_array_equal(renamed.X, attr.X)
    np.testing.assert_array_equal(renamed.baseline, attr.baseline)
    np.testing.assert_array_equal(renamed.cov, attr.cov)


@pytest.mark.parametrize(
    ("groups", "kwargs", "error", "fragment"),
    [
        ({"g": ["f9"]}, {}, ValueError, "unknown feature 'f9'"),
        ({"g": ["f0"], "h": ["f0", "f1"]}, {"X": np.zeros((3, 4))}, ValueError, "'g' and 'h'"),
        ({"g": []}, {}, ValueError, "empty"),
        ({"f1": ["f0"]}, {}, ValueError, "also ungrouped"),
        ({"g": ["f0", "f1"]}, {}, ValueError, "X is required"),
        ({"g": ["f0", "f1"]}, {"X": np.zeros((3, 5))}, ValueError,
         r"one column per group, in the order of the grouped feature names "
         r"\['g', 'f2', 'f3', 'f4'\].*shape \(3, 4\)"),
        ({"g": "f0"}, {}, TypeError, "sequence of feature names"),
        ([("g", ["f0"])], {}, TypeError, "must map"),
    ],
)
def test_group_refuses_bad_groups(groups, kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        _random_attribution().group(groups, **kwargs)


# -- CategoricalEncoder --------------------------------------------------------------------
def test_encoder_matches_pandas_dummies_and_keeps_numbers():
    X, _ = _mixed_frame()
    encoder = CategoricalEncoder().fit(X)
    assert encoder.categorical_ == ["colour"]  # integers and booleans are numeric
    assert encoder.groups_["colour"] == ["colour_blue", "colour_green", "colour_red"]
    encoded = encoder.transform(X)
    reference = pd.get_dummies(X, columns=["colour"], dtype=float)
    assert list(encoded.columns) == ["a", "colour_blue", "colour_green", "colour_red", "n",
                                     "flag"]
    pd.testing.assert_frame_equal(encoded, reference[encoded.columns].astype(float))


def test_encoder_errors_name_the_column():
    X, _ = _mixed_frame()
    encoder = CategoricalEncoder().fit(X)
    with pytest.raises(ValueError, match=r"'colour' has categories \['purple'\]"):
        encoder.transform(X.assign(colour="purple"))
    with pytest.raises(ValueError, match=r"lacks the columns \['a'\]"):
        encoder.transform(X.drop(columns="a"))
    with pytest.raises(ValueError, match="'colour' has a missing value at row 3"):
        CategoricalEncoder().fit(X.assign(colour=X["colour"].where(X.index != 3)))
    with pytest.raises(ValueError, match="'id'.*identifier"):
        CategoricalEncoder().fit(X.assign(id=[f"r{i}" for i in range(len(X))]))
    with pytest.raises(TypeError, match="DataFrame"):
        CategoricalEncoder().fit(X.to_numpy())


# -- make_pipeline -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mixed_pipeline():
    X, y = _mixed_frame()
    return X, y, gx.make_pipeline(GPRegressor(n_restarts=0)).fit(X, y)


def test_pipeline_explains_in_original_columns(mixed_pipeline):
    X, _, pipeline = mixed_pipeline
    rows = X.iloc[:5]
    grouped = pipeline.explain(rows, baseline="mean")
    ungrouped = gx.integrated_gradients(pipeline.estimator_, pipeline.transform(rows))
    assert grouped.feature_names == ["a", "colour", "n", "flag"]
    block = [ungrouped.feature_names.index(c) for c in pipeline.encoder_.groups_["colour"]]
    np.testing.assert_allclose(
        grouped.mean[:, 1], ungrouped.mean[:, block].sum(axis=1), rtol=1e-12
    )
    np.testing.assert_allclose(
        grouped.cov[:, 1, 1], ungrouped.cov[:, block][:, :, block].sum(axis=(1, 2)), rtol=1e-10
    )
    gaps = grouped.completeness_gap()
    scale = np.abs(grouped.mean).max()
    assert gaps["mean"] < 1e-8 * scale and gaps["variance"] < 1e-8 * grouped.var.max()
    assert list(grouped.X[:, 1]) == list(rows["colour"])
    frequencies = X["colour"].value_counts(normalize=True)
    assert grouped.baseline[1] == pytest.approx(frequencies.to_dict())
    assert grouped.to_frame()["value"].iloc[1] == rows["colour"].iloc[0]


def test_pipeline_default_baseline_is_the_typical_row(mixed_pipeline):
    """Default: each numeric column's mean and each text column's most frequent category,
    through ``explain`` and through ``gx.integrated_gradients`` alike."""
    X, _, pipeline = mixed_pipeline
    mode = X["colour"].value_counts().sort_index().idxmax()  # ties: first in sorted order
    expected = {c: float(c == mode) for c in ("blue", "green", "red")}
    for attr in (pipeline.explain(X.iloc[:4]), gx.integrated_gradients(pipeline, X.iloc[:4])):
        assert attr.baseline[1] == expected
        assert attr.baseline[0] == pytest.approx(X["a"].mean(), rel=1e-12)
        assert attr.baseline[2] == pytest.approx(X["n"].mean(), rel=1e-12)
        same = (X["colour"].iloc[:4] == mode).to_numpy()
        assert np.all(attr.mean[same, 1] == 0.0)
    explicit = gx.integrated_gradients(pipeline, X.iloc[:4], baseline="typical")
    np.testing.assert_array_equal(explicit.mean, pipeline.explain(X.iloc[:4]).mean)


def test_a_baseline_the_model_knows_only_its_prior_at_is_warned():
    """An indicator with a short lengthscale: its 'mean' (a category frequency) is far from
    every row, so the posterior variance there is about the prior's; the warning states the
    ratio, which a NumPy posterior written here reproduces."""
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(0, 2, 40).astype(float), rng.normal(size=40)])
    y = X[:, 0] + np.sin(X[:, 1])
    lengthscale, noise = np.array([0.02, 1.0]), 0.01
    posterior = gx.ExactPosterior(X, y, gx.kernels.RBF(lengthscale, 1.0), noise=noise)

    def kernel(A, B):
        d = (A[:, None, :] - B[None, :, :]) / lengthscale
        return np.exp(-0.5 * (d ** 2).sum(-1))

    gram = kernel(X, X) + noise * np.eye(len(X))
    baseline = X.mean(0)[None, :]
    cross = kernel(baseline, X)
    ratio = 1.0 - (cross @ np.linalg.solve(gram, cross.T))[0, 0]
    with pytest.warns(gx.BaselineWarning, match=f"{ratio:.0%} of the prior variance"):
        gx.integrated_gradients(posterior, X[:2])
    with pytest.warns(gx.BaselineWarning):
        gx.shapley_values(posterior, X[:2], game="baseline")
    with warnings.catch_warnings():
        warnings.simplefilter("error", gx.BaselineWarning)
        gx.integrated_gradients(posterior, X[:2], baseline=X[5])


def test_pipeline_row_baseline_is_a_real_category(mixed_pipeline):
    X, _, pipeline = mixed_pipeline
    reference = X.iloc[7]
    attr = pipeline.explain(X.iloc[:3], baseline=reference)
    assert attr.baseline[1] == {
        c: float(c == reference["colour"]) for c in ("blue", "green", "red")
    }
    # rows of the baseline's own colour get exactly zero colour attribution (x_i = xt_i)
    same = (X["colour"].iloc[:3] == reference["colour"]).to_numpy()
    assert np.all(attr.mean[same, 1] == 0.0)
    np.testing.assert_allclose(
        attr.mean.sum(axis=1), attr.prediction - pipeline.predict(X.iloc[[7]])[0], atol=1e-8
    )
    with pytest.raises(TypeError, match="baseline must be"):
        pipeline.explain(X.iloc[:3], baseline=np.zeros(6))
    with pytest.raises(ValueError, match="not fitted"):
        gx.make_pipeline(GPRegressor()).explain(X)


def test_explanation_functions_take_a_fitted_pipeline(mixed_pipeline):
    """``gx.integrated_gradients``, ``gx.shapley_values`` and ``gx.global_sensitivity`` of a
    fitted pipeline explain the table's rows (they said "not fitted yet")."""
    X, _, pipeline = mixed_pipeline
    rows = X.iloc[:3]
    np.testing.assert_array_equal(gx.integrated_gradients(pipeline, rows).mean,
                                  pipeline.explain(rows).mean)
    shapley = gx.shapley_values(pipeline, rows, game="baseline", baseline=X.iloc[7])
    assert shapley.feature_names == ["a", "colour", "n", "flag"]
    np.testing.assert_allclose(
        shapley.mean.sum(axis=1), shapley.prediction - pipeline.predict(X.iloc[[7]])[0],
        atol=1e-8,
    )
    indices = gx.global_sensitivity(pipeline)
    assert indices.feature_names == pipeline.encoder_.feature_names_out_
    expected = gx.global_sensitivity(
        pipeline.estimator_, gx.measures.Empirical(pipeline.transform(X).to_numpy()))
    np.testing.assert_allclose(indices.shapley_effects, expected.shapley_effects, rtol=1e-12)


def test_pipeline_saves_with_its_encoder(mixed_pipeline, tmp_path):
    """``save`` / ``gx.load``: the encoder travels with the estimator (no pickle), and the
    loaded pipeline predicts and explains the text table bit-identically."""
    X, _, pipeline = mixed_pipeline
    path = pipeline.save(tmp_path / "pipeline")
    loaded = gx.load(path, expected=gx.CategoricalPipeline)
    assert loaded.encoder_.groups_ == pipeline.encoder_.groups_
    np.testing.assert_array_equal(loaded.predict(X), pipeline.predict(X))
    np.testing.assert_array_equal(loaded.explain(X.iloc[:3]).mean,
                                  pipeline.explain(X.iloc[:3]).mean)
    with pytest.raises(ValueError, match="not fitted"):
        gx.make_pipeline(GPRegressor()).save(tmp_path / "unfitted")


# -- the command line ----------------------------------------------------------------------
@pytest.fixture
def single_start(monkeypatch):
    one_start(monkeypatch)


def _explain_ok(path, target, rows, out):
    """``gpexplain explain`` without a held-out split; the attributions table it wrote."""
    result = runner.invoke(
        app, ["explain", str(path), "--target", target, "--rows", rows, "--no-holdout",
              "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    return pd.read_csv(out / "attributions.csv")


def test_cli_explains_a_text_column(tmp_path, single_start):
    X, y = _mixed_frame()
    path = tmp_path / "mixed.csv"
    pd.concat([X, y], axis=1).to_csv(path, index=False)
    out = tmp_path / "out"
    table = _explain_ok(path, "y", "0:4", out)
    assert table["feature"].unique().tolist() == ["a", "colour", "n", "flag"]
    assert table.loc[table["feature"] == "colour", "value"].tolist() == X["colour"][:4].tolist()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["categorical_columns"] == {
        "colour": ["colour_blue", "colour_green", "colour_red"]
    }
    assert summary["completeness_gap"]["mean"] < 1e-8
    # the summary describes the model: its baseline is a point of the encoded table
    encoded = pd.get_dummies(X, columns=["colour"], dtype=float)
    assert set(summary["baseline"]["vector"]) == set(encoded.columns)
    # the default baseline is the typical row: the most frequent colour
    mode = X["colour"].value_counts().sort_index().idxmax()
    assert summary["baseline"]["spec"] == "typical"
    assert {c: summary["baseline"]["vector"][f"colour_{c}"] for c in ("blue", "green", "red")} \
        == {c: float(c == mode) for c in ("blue", "green", "red")}


def test_cli_abalone_sex_column(data_dir, tmp_path, single_start):
    abalone = read_table(data_dir / "abalone" / "abalone.data").iloc[::28]  # 150 rows
    path = tmp_path / "abalone.data"
    abalone.to_csv(path, index=False, header=False)
    table = _explain_ok(path, "-1", "0:2", tmp_path / "out")
    assert table["feature"].unique().tolist() == [f"x{j}" for j in range(8)]
    assert table["value"].iloc[0] in {"M", "F", "I"}


def test_cli_guerry_text_columns(data_dir, tmp_path, single_start):
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["explain", str(data_dir / "guerry" / "guerry.csv"), "--target", "Literacy",
              "--drop", "dept,Department", "--missing", "drop", "--rows", "0:2",
              "--no-holdout", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["categorical_columns"]) == {"Region", "MainCity"}
    assert summary["missing"]["dropped_rows"]  # Guerry has one department without a region
    refused = runner.invoke(
        app, ["explain", str(data_dir / "guerry" / "guerry.csv"), "--target", "Literacy",
              "--missing", "drop", "--out", str(out)],
    )
    assert refused.exit_code == 2 and "'Department'" in refused.stderr
