"""``gpexplain explain --method shapley`` for exact GPs and ``gpexplain sensitivity``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.test_cli import assert_ok, invoke, one_start, small_frame


@pytest.fixture
def small_csv(tmp_path, monkeypatch):
    # One optimiser start: fit quality is not the subject here.
    one_start(monkeypatch)
    path = tmp_path / "small.csv"
    small_frame().to_csv(path, index=False)
    return path


def _explain(tmp_path, data, *options):
    out = tmp_path / "out"
    result = invoke("explain", data, "--target", "y", "--rows", "0:3", "--no-holdout",
                    "--out", out, "--method", "shapley", *options)
    assert_ok(result)
    return json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize(
    ("options", "game", "spec"),
    [
        (["--background", "10"], "interventional", "10 background rows drawn with the seed"),
        (["--game", "baseline", "--baseline", "median"], "baseline", "median"),
        (["--game", "product-measure"], "product-measure", "base value"),
    ],
)
def test_exact_gp_shapley_games(tmp_path, small_csv, options, game, spec):
    summary = _explain(tmp_path, small_csv, *options)
    assert summary["method"] == f"exact Shapley values ({game} game, product kernel, closed form)"
    assert summary["baseline"]["spec"] == spec
    assert summary["completeness_gap"]["mean"] < 1e-8
    assert summary["completeness_gap"]["variance"] < 1e-8


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (["--method", "shapley", "--game", "conditional"], "unknown --game"),
        (["--method", "shapley", "--background", "0"], "--background N"),
        (["--method", "shapley", "--game", "baseline", "--background", "5"], "--background N"),
        (["--game", "baseline"], "apply to --model exact --method shapley only"),
        (["--model", "additive", "--method", "shapley", "--game", "baseline"], "exact"),
        (["--method", "shapley", "--kernel", "matern52"], "product kernel"),
        (["--method", "shapley", "--baseline", "median"], "--baseline applies"),
    ],
)
def test_bad_shapley_options_exit_2(tmp_path, small_csv, options, fragment):
    result = invoke("explain", small_csv, "--target", "y", "--no-holdout", "--rows", "0:2",
                    "--out", tmp_path / "o", *options)
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert message.startswith("Error: ") and "\n" not in message, message
    assert fragment in message, message


def test_sensitivity_command(tmp_path, small_csv):
    out = tmp_path / "sens"
    result = invoke("sensitivity", small_csv, "--target", "y", "--out", out, "--report")
    assert_ok(result)
    table = pd.read_csv(out / "sensitivity.csv")
    assert list(table["feature"]) == ["a", "b", "c"]
    page = (out / "report.html").read_text()
    assert "<h2>Global sensitivity</h2>" in page and page.count("data:image/png") == 1
    assert "Sobol" in page and "report.html" in result.stdout
    np.testing.assert_allclose(table["shapley_index"].sum(), 1.0, rtol=1e-10)
    for column in ("first_order_std", "total_std", "shapley_effect_std"):
        assert np.all(table[column] >= 0)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["std_of_variance_over_posterior"] > 0
    assert "+-" in result.stdout
    assert summary["kernel"] == "ard" and "Sobol" in summary["method"]
    assert (out / "sensitivity.png").stat().st_size > 0
    # y = sin(a) + 0.3 b + noise over b in [0, 10]: b dominates, c is irrelevant.
    by_feature = table.set_index("feature")
    assert by_feature.loc["b", "total_index"] > by_feature.loc["c", "total_index"]


def test_sensitivity_refuses_other_kernels(tmp_path, small_csv):
    result = invoke("sensitivity", small_csv, "--target", "y", "--kernel", "matern52",
                    "--out", tmp_path / "o")
    assert result.exit_code == 2
    assert "product kernels" in result.stderr


@pytest.mark.parametrize("labels", [["yes", "no"], [True, False]])
def test_sensitivity_refuses_class_labels_naming_the_alternatives(tmp_path, labels):
    frame = small_frame()
    frame["y"] = labels * (len(frame) // 2) + labels[:len(frame) % 2]
    path = tmp_path / "labels.csv"
    frame.to_csv(path, index=False)
    result = invoke("sensitivity", path, "--target", "y", "--out", tmp_path / "o")
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "holds class labels" in message and "--method shapley" in message
    assert "gx.global_sensitivity" in message and "--task" not in message


def test_interactions_method_writes_interactions_csv_and_report(tmp_path, small_csv):
    # --model additive takes the same path (its fit is slow; its values: tests/explain)
    out = tmp_path / "out"
    result = invoke("explain", small_csv, "--target", "y", "--rows", "0:2", "--no-holdout",
                    "--out", out, "--method", "interactions", "--background", "5", "--report")
    assert_ok(result)
    table = pd.read_csv(out / "interactions.csv")
    assert list(table.columns) == ["row", "point", "order", "feature_i", "feature_j", "value",
                                   "std", "lower", "upper"]
    summary = json.loads((out / "summary.json").read_text())
    d = len(summary["feature_names"])
    assert len(table) == 2 * (d + d * (d - 1) // 2)
    assert summary["method_id"] == "shapley-interactions"
    assert summary["interactions"]["index"] == "k-SII"
    assert max(summary["interactions"]["efficiency_gap"].values()) < 1e-8
    assert summary["completeness_gap"]["mean"] < 1e-8  # attributions.csv: the Shapley values
    assert (out / "interactions.png").is_file()
    report = (out / "report.html").read_text()
    assert "Pairwise Shapley interactions" in report and "Grabisch" in report


def test_interactions_refuse_other_kernels(tmp_path, small_csv):
    result = invoke("explain", small_csv, "--target", "y", "--no-holdout", "--rows", "0:2",
                    "--out", tmp_path / "o", "--method", "interactions", "--kernel", "matern52")
    assert result.exit_code == 2 and "--method interactions needs a product kernel" in (
        result.stderr)


def test_sensitivity_interactions(tmp_path, small_csv):
    out = tmp_path / "sens"
    result = invoke("sensitivity", small_csv, "--target", "y", "--out", out, "--interactions")
    assert_ok(result)
    table = pd.read_csv(out / "interactions.csv")
    assert list(table[["feature_i", "feature_j"]].itertuples(index=False, name=None)) == [
        ("a", "b"), ("a", "c"), ("b", "c")]
    assert np.all(table["second_order"] >= 0) and np.all(table["second_order_std"] >= 0)
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["interactions"]) == 3 and "interactions.csv" in result.stdout


def test_interactions_refuse_dask_before_fitting(tmp_path, small_csv):
    result = invoke("explain", small_csv, "--target", "y", "--no-holdout", "--rows", "0:2",
                    "--out", tmp_path / "o", "--method", "interactions", "--workers", "1")
    assert result.exit_code == 2 and "do not apply to --method interactions" in result.stderr
