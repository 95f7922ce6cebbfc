"""``gpexplain explain`` with several ``--target`` columns (issue 24): one model of all the
targets, explained jointly, on the first 100 rows of the bundled Taipei real-estate table
(targets: the price and the number of convenience stores, from house age, MRT distance,
latitude and longitude).

* independent targets: each target's attributions equal those of a run with that target
  alone (the other dropped), and the report has a section per target;
* ``--multi-output icm``: ``output_correlations.csv`` equals the correlation computed here
  with NumPy from the joint covariance of the same model fitted in Python;
* a model saved with ``--save-model`` explains the same rows again with ``--model-from``;
* refusals: one line, exit code 2.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import gpexplain as gx
from gpexplain.datasets import load_dataset
from tests.test_cli import assert_ok, invoke

PRICE = "Y house price of unit area"
STORES = "X4 number of convenience stores"
FEATURES = ["X2 house age", "X3 distance to the nearest MRT station", "X5 latitude",
            "X6 longitude"]
ROWS = "0:3"


@pytest.fixture(scope="module")
def taipei_csv(tmp_path_factory):
    X, price = load_dataset("taipei-real-estate")
    frame = X[FEATURES + [STORES]].assign(**{PRICE: price}).iloc[:100]
    path = tmp_path_factory.mktemp("taipei") / "taipei.csv"
    frame.to_csv(path, index=False)
    return path


def _run(path, out, *options):
    result = invoke("explain", path, "--rows", ROWS, "--out", out, *options)
    assert_ok(result)
    return out


@pytest.fixture(scope="module")
def independent(taipei_csv, tmp_path_factory):
    return _run(taipei_csv, tmp_path_factory.mktemp("independent") / "out",
                "--target", PRICE, "--target", STORES, "--report")


def test_independent_targets_equal_runs_of_one_target(independent, taipei_csv, tmp_path):
    table = pd.read_csv(independent / "attributions.csv")
    assert list(table.columns[:3]) == ["row", "output", "point"]
    assert table["output"].unique().tolist() == [PRICE, STORES]
    summary = json.loads((independent / "summary.json").read_text())
    assert summary["task"] == "multi-output regression"
    assert summary["outputs"] == [PRICE, STORES] and summary["target"] == [PRICE, STORES]
    assert summary["cross_output_correlation"]["independent"] is True
    assert set(summary["holdout"]["r2"]) == {PRICE, STORES}
    assert not (independent / "output_correlations.csv").exists()
    for target in (PRICE, STORES):  # exact, from each target's covariance across rows
        assert set(summary["global_importance"][target]["std"]) == set(FEATURES)
    for target, other in ((PRICE, STORES), (STORES, PRICE)):
        alone = _run(taipei_csv, tmp_path / f"alone{len(target)}", "--target", target,
                     "--drop", other, "--no-holdout")
        reference = pd.read_csv(alone / "attributions.csv")
        mine = table[table["output"] == target].reset_index(drop=True)
        for column in ("attribution", "std"):
            np.testing.assert_allclose(mine[column], reference[column], rtol=1e-9,
                                       atol=1e-12 * reference[column].abs().max())
        single = json.loads((alone / "summary.json").read_text())
        np.testing.assert_allclose(summary["predictions"][target], single["predictions"],
                                   rtol=1e-10)
        gaps = summary["completeness_gap"][target]
        assert gaps["mean"] < 1e-8 * max(np.abs(single["predictions"]))
    for suffix in ("Y_house_price_of_unit_area", "X4_number_of_convenience_stores"):
        assert (independent / f"attributions_{suffix}.png").is_file()
        assert (independent / f"importance_{suffix}.png").is_file()


def test_report_has_a_section_per_target(independent):
    page = (independent / "report.html").read_text()
    for target in (PRICE, STORES):
        assert f"Per-row explanations of target {target}" in page
    assert "uncorrelated by the model" in page
    assert "R<sup>2</sup> of each target" in page


def test_icm_writes_the_correlation_of_the_attributions_across_targets(taipei_csv, tmp_path):
    out = _run(taipei_csv, tmp_path / "icm", "--target", PRICE, "--target", STORES,
               "--multi-output", "icm", "--no-holdout", "--report")
    written = pd.read_csv(out / "output_correlations.csv")
    assert list(written.columns) == ["row", "point", "feature", "output_i", "output_j",
                                     "correlation"]
    # The same model fitted in Python (the ICM fit is deterministic: one start), and the
    # correlation of each feature's attributions between the targets from its joint covariance.
    frame = pd.read_csv(taipei_csv)
    model = gx.GPRegressor(multi_output="icm").fit(frame[FEATURES], frame[[PRICE, STORES]])
    result = gx.integrated_gradients(model, frame[FEATURES].iloc[:3], baseline="mean")
    cov = result.cov  # (points, targets, features, targets, features)
    features = np.arange(len(FEATURES))
    cross = cov[:, 0, features, 1, features]
    expected = cross / np.sqrt(cov[:, 0, features, 0, features] * cov[:, 1, features, 1, features])
    np.testing.assert_allclose(written["correlation"].to_numpy().reshape(3, -1), expected,
                               rtol=1e-6, atol=1e-9)
    assert np.abs(expected).max() > 0.05  # the coregionalised targets are correlated
    summary = json.loads((out / "summary.json").read_text())
    B = model.coregionalization_
    assert summary["hyperparameters"]["coregionalization"][PRICE][STORES] == pytest.approx(
        B[0, 1], rel=1e-6)
    means = summary["cross_output_correlation"]["mean_correlation"][0]["features"]
    np.testing.assert_allclose([means[f] for f in FEATURES], expected.mean(0), rtol=1e-6)
    assert "Correlation of the attributions across targets" in (out / "report.html").read_text()
    for target in (PRICE, STORES):  # each target's covariance across rows, from its marginal
        importance = summary["global_importance"][target]
        assert set(importance["std"]) == set(FEATURES)
        assert all(value > 0 for value in importance["std"].values())
    # the importances' covariance between the targets, as gx.global_importance gives it
    between = pd.read_csv(out / "importance_correlations.csv")
    assert summary["cross_output_importance"]["file"] == "importance_correlations.csv"
    reference = gx.global_importance(model, frame[FEATURES].iloc[:3], baseline="mean")
    np.testing.assert_allclose(between["covariance"],
                               reference.importance_covariance()[:, 0, 1], rtol=1e-6)
    assert list(between["feature"]) == FEATURES
    assert np.all(np.abs(between["correlation"]) <= 1.0)


def test_lmc_writes_its_terms_and_the_correlation_of_the_attributions(taipei_csv, tmp_path):
    """--multi-output lmc: the model GPRegressor(multi_output="lmc") of the same rows (its fit
    is deterministic: one start, seeded new terms), its terms in summary.json and the
    correlation of each feature's attributions between the targets from its joint
    covariance."""
    out = _run(taipei_csv, tmp_path / "lmc", "--target", PRICE, "--target", STORES,
               "--multi-output", "lmc", "--no-holdout")
    frame = pd.read_csv(taipei_csv)
    model = gx.GPRegressor(multi_output="lmc").fit(frame[FEATURES], frame[[PRICE, STORES]])
    assert isinstance(model.posterior_, gx.LMCPosterior)
    result = gx.integrated_gradients(model, frame[FEATURES].iloc[:3], baseline="mean")
    cov = result.cov
    features = np.arange(len(FEATURES))
    expected = cov[:, 0, features, 1, features] / np.sqrt(
        cov[:, 0, features, 0, features] * cov[:, 1, features, 1, features])
    written = pd.read_csv(out / "output_correlations.csv")
    np.testing.assert_allclose(written["correlation"].to_numpy().reshape(3, -1), expected,
                               rtol=1e-6, atol=1e-9)
    summary = json.loads((out / "summary.json").read_text())
    terms = summary["hyperparameters"]["terms"]
    assert len(terms) == 2
    for term, B in zip(terms, model.coregionalization_, strict=True):
        assert term["coregionalization"][PRICE][STORES] == pytest.approx(B[0, 1], rel=1e-6)


def test_n_components_fits_that_many_terms_and_is_saved_with_the_model(taipei_csv, tmp_path):
    """--n-components 1: the one-term LMC of GPRegressor(multi_output="lmc", n_components=1)
    (the ICM's fit), its one term in summary.json, kept by --save-model; --model-from
    refuses a new --n-components."""
    options = ["--target", PRICE, "--target", STORES, "--multi-output", "lmc",
               "--n-components", "1", "--no-holdout"]
    out = _run(taipei_csv, tmp_path / "one", *options, "--save-model", tmp_path / "saved")
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["hyperparameters"]["terms"]) == 1
    frame = pd.read_csv(taipei_csv)
    model = gx.GPRegressor(multi_output="lmc", n_components=1).fit(
        frame[FEATURES], frame[[PRICE, STORES]])
    B = model.coregionalization_[0]
    assert summary["hyperparameters"]["terms"][0]["coregionalization"][PRICE][STORES] == (
        pytest.approx(B[0, 1], rel=1e-6))
    again = _run(taipei_csv, tmp_path / "again", "--model-from", tmp_path / "saved")
    pd.testing.assert_frame_equal(pd.read_csv(out / "attributions.csv"),
                                  pd.read_csv(again / "attributions.csv"))
    refused = invoke("explain", taipei_csv, "--model-from", tmp_path / "saved",
                     "--n-components", "2", "--out", tmp_path / "out")
    assert refused.exit_code == 2 and "--n-components" in refused.stderr


def test_exact_shapley_values_of_each_target_are_complete(taipei_csv, tmp_path):
    out = _run(taipei_csv, tmp_path / "shapley", "--target", PRICE, "--target", STORES,
               "--method", "shapley", "--game", "baseline", "--no-holdout")
    table = pd.read_csv(out / "attributions.csv")
    summary = json.loads((out / "summary.json").read_text())
    for target in (PRICE, STORES):
        rows = table[table["output"] == target]
        sums = rows.groupby("point")["attribution"].sum().to_numpy()
        base = summary["baseline"]["prediction"][target]
        np.testing.assert_allclose(sums, np.array(summary["predictions"][target]) - base,
                                   rtol=0, atol=1e-8 * max(abs(base), 1.0))


@pytest.mark.parametrize("form", ["independent", "icm", "lmc"])
def test_a_saved_model_of_several_targets_explains_again_with_model_from(form, taipei_csv,
                                                                         tmp_path):
    """--save-model with several targets, then --model-from on the same file (targets in it
    or dropped): the same attributions, bit for bit; a model saved from Python too."""
    first = _run(taipei_csv, tmp_path / "fit", "--target", PRICE, "--target", STORES,
                 "--multi-output", form, "--save-model", tmp_path / "saved", "--no-holdout")
    again = _run(taipei_csv, tmp_path / "again", "--model-from", tmp_path / "saved")
    fitted, reloaded = (pd.read_csv(d / "attributions.csv") for d in (first, again))
    pd.testing.assert_frame_equal(fitted, reloaded)
    summary = json.loads((again / "summary.json").read_text())
    assert summary["outputs"] == [PRICE, STORES]
    frame = pd.read_csv(taipei_csv)
    model = gx.GPRegressor(n_restarts=0).fit(frame[FEATURES], frame[[PRICE, STORES]])
    gx.save(model, tmp_path / "python")
    features_only = tmp_path / "features.csv"
    frame[FEATURES].to_csv(features_only, index=False)
    _run(features_only, tmp_path / "python-out", "--model-from", tmp_path / "python")
    refused = invoke("explain", taipei_csv, "--model-from", tmp_path / "saved", "--target", PRICE,
                     "--target", "X2 house age", "--out", tmp_path / "out")
    assert refused.exit_code == 2 and "explains the targets it was fitted on" in refused.stderr


def test_sparse_targets_equal_runs_of_one_target_and_explain_again(taipei_csv, tmp_path):
    """--model sparse with several targets: one SVGP per target (SparseGPRegressor on a 2-D
    y), each target's attributions those of a run with that target alone (--n-inducing
    applies to every target's SVGP); saved with
    --save-model, it explains the same rows again with --model-from, bit for bit."""
    out = _run(taipei_csv, tmp_path / "both", "--target", PRICE, "--target", STORES,
               "--model", "sparse", "--n-inducing", "60", "--no-holdout", "--save-model",
               tmp_path / "saved")
    table = pd.read_csv(out / "attributions.csv")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["outputs"] == [PRICE, STORES] and summary["multi_output"] == "independent"
    assert summary["cross_output_correlation"]["independent"] is True
    assert set(summary["hyperparameters"]) == {PRICE, STORES}
    for target, other in ((PRICE, STORES), (STORES, PRICE)):
        alone = _run(taipei_csv, tmp_path / f"alone{len(target)}", "--target", target,
                     "--drop", other, "--model", "sparse", "--n-inducing", "60",
                     "--no-holdout")
        reference = pd.read_csv(alone / "attributions.csv")
        mine = table[table["output"] == target].reset_index(drop=True)
        for column in ("attribution", "std"):
            np.testing.assert_allclose(mine[column], reference[column], rtol=1e-9,
                                       atol=1e-12 * reference[column].abs().max())
    again = _run(taipei_csv, tmp_path / "again", "--model-from", tmp_path / "saved")
    pd.testing.assert_frame_equal(table, pd.read_csv(again / "attributions.csv"))


@pytest.mark.parametrize(
    ("options", "fragments"),
    [
        (["--target", PRICE, "--target", "flag"], ["'flag' holds class labels"]),
        (["--target", PRICE, "--target", STORES, "--task", "classification"],
         ["a classifier takes one --target"]),
        (["--target", PRICE, "--target", STORES, "--model", "random-features"],
         ["several --target columns need --model exact, sparse"]),
        (["--target", PRICE, "--target", STORES, "--model", "sparse", "--multi-output", "icm"],
         ["--model sparse takes --multi-output independent, not icm"]),
        (["--target", PRICE, "--multi-output", "icm"],
         ["--multi-output icm applies to several --target columns"]),
        (["--target", PRICE, "--target", STORES, "--method", "interactions"],
         ["--method interactions explains one target"]),
        (["--target", PRICE, "--target", STORES, "--explain", "variance"],
         ["--explain variance applies to one --target"]),
        (["--target", PRICE, "--target", PRICE], ["is given more than once"]),
        (["--target", PRICE, "--task", "multi-output"], ["needs two or more --target"]),
        (["--target", PRICE, "--target", STORES, "--multi-output", "slfm"],
         ["unknown --multi-output 'slfm'"]),
        (["--target", PRICE, "--target", STORES, "--multi-output", "icm", "--kernel", "rq"],
         ["use --kernel ard, not rq"]),
        (["--target", PRICE, "--target", STORES, "--multi-output", "icm", "--rank", "0"],
         ["--rank must be a positive integer", "got 0"]),
        (["--target", PRICE, "--target", STORES, "--multi-output", "icm", "--rank", "3"],
         ["--rank 3 is above the number of --target columns, 2"]),
        (["--target", PRICE, "--target", STORES, "--rank", "1"],
         ["--rank applies to --multi-output icm", "not to --multi-output independent"]),
        (["--target", PRICE, "--rank", "1"], ["--rank applies to --multi-output icm"]),
        (["--target", PRICE, "--target", STORES, "--n-components", "2"],
         ["--n-components applies to --multi-output lmc", "not to --multi-output independent"]),
        (["--target", PRICE, "--target", STORES, "--multi-output", "lmc", "--n-components",
          "0"], ["--n-components must be a positive integer", "got 0"]),
    ],
)
def test_refusals_are_one_line_with_exit_code_2(options, fragments, taipei_csv, tmp_path):
    # 0/1 codes: a class target under --task auto
    _assert_refused("explain", taipei_csv, tmp_path, lambda many: many.astype(int), options,
                    fragments)


def _assert_refused(command, taipei_csv, tmp_path, flag, options, fragments):
    """``command`` on the Taipei rows with a column ``flag`` (``flag`` of whether a row has
    more than 4 stores) and ``options`` exits with code 2 and one line holding ``fragments``,
    writing nothing."""
    frame = pd.read_csv(taipei_csv)
    frame["flag"] = flag(frame[STORES] > 4)
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    result = invoke(command, path, "--out", tmp_path / "out", *options)
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert message.startswith("Error: ") and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    assert not (tmp_path / "out").exists()


# ``gpexplain sensitivity`` with several --target columns: the same model as explain's, each
# target's indices those of its marginal posterior.

def _sensitivity(path, out, *options):
    result = invoke("sensitivity", path, "--out", out, *options)
    assert_ok(result)
    return out


def test_sensitivity_of_independent_targets_equals_runs_of_one_target(taipei_csv, tmp_path):
    out = _sensitivity(taipei_csv, tmp_path / "both", "--target", PRICE, "--target", STORES,
                       "--interactions", "--report")
    table = pd.read_csv(out / "sensitivity.csv")
    pairs = pd.read_csv(out / "interactions.csv")
    assert table.columns[0] == "output" and pairs.columns[0] == "output"
    assert table["output"].unique().tolist() == [PRICE, STORES]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["outputs"] == [PRICE, STORES] and summary["multi_output"] == "independent"
    assert summary["cross_output"]["independent"] is True
    for target, other in ((PRICE, STORES), (STORES, PRICE)):
        alone = _sensitivity(taipei_csv, tmp_path / f"alone{len(target)}", "--target", target,
                             "--drop", other, "--interactions")
        for name, mine in (("sensitivity.csv", table), ("interactions.csv", pairs)):
            reference = pd.read_csv(alone / name)
            rows = mine[mine["output"] == target].drop(columns="output").reset_index(drop=True)
            assert list(rows.columns) == list(reference.columns)
            numbers = reference.select_dtypes("number").columns
            np.testing.assert_allclose(rows[numbers], reference[numbers], rtol=1e-8,
                                       atol=1e-10 * reference[numbers].abs().to_numpy().max())
            assert rows.drop(columns=numbers).equals(reference.drop(columns=numbers))
        single = json.loads((alone / "summary.json").read_text())
        for key in ("variance_of_posterior_mean", "expected_variance_over_posterior",
                    "std_of_variance_over_posterior"):
            assert summary[key][target] == pytest.approx(single[key], rel=1e-8)
        assert [f["feature"] for f in summary["features"][target]] == FEATURES
        assert len(summary["interactions"][target]) == len(single["interactions"])
        assert set(summary["hyperparameters"][target]["lengthscales"]) == set(FEATURES)
    for suffix in ("Y_house_price_of_unit_area", "X4_number_of_convenience_stores"):
        assert (out / f"sensitivity_{suffix}.png").stat().st_size > 0
    assert not (out / "sensitivity.png").exists()
    assert summary["figures"] == {PRICE: "sensitivity_Y_house_price_of_unit_area.png",
                                  STORES: "sensitivity_X4_number_of_convenience_stores.png"}
    page = (out / "report.html").read_text()
    for target in (PRICE, STORES):  # a section per target, its figure inlined
        assert f"Global sensitivity of target {target}</h2>" in page
    assert page.count("data:image/png") == 2 and "Sobol" in page
    assert "zero (independent GPs)" in page and "Strongest pairs" in page


def test_report_command_reads_a_sensitivity_output(taipei_csv, tmp_path):
    out = _sensitivity(taipei_csv, tmp_path / "sens", "--target", PRICE, "--target", STORES)
    assert not (out / "report.html").exists()
    assert_ok(invoke("report", out))
    page = (out / "report.html").read_text()
    assert page.count("Global sensitivity of target") == 2
    table = pd.read_csv(out / "sensitivity.csv")
    top = table[table["output"] == STORES].sort_values("total_index").iloc[-1]
    assert f"<td>{top['total_index']:.4g}</td>" in page
    summary = json.loads((out / "summary.json").read_text())
    del summary["figures"]
    (out / "summary.json").write_text(json.dumps(summary))
    refused = invoke("report", out)
    assert refused.exit_code == 2 and "not written by this version of gpexplain sensitivity" in (
        refused.stderr)


@pytest.mark.parametrize(("form", "options", "settings"), [
    ("icm", [], {}),
    # an LMC of two terms: each target's marginal is a sum of two product kernels
    ("lmc", ["--n-components", "2"], {"n_components": 2}),
])
def test_sensitivity_of_a_coregionalised_model_is_that_of_each_marginal(
        form, options, settings, taipei_csv, tmp_path):
    out = _sensitivity(taipei_csv, tmp_path / form, "--target", PRICE, "--target", STORES,
                       "--multi-output", form, *options)
    table = pd.read_csv(out / "sensitivity.csv")
    frame = pd.read_csv(taipei_csv)
    model = gx.GPRegressor(multi_output=form, **settings).fit(frame[FEATURES],
                                                             frame[[PRICE, STORES]])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cross_output"]["independent"] is False
    assert summary["multi_output"] == form
    if form == "icm":
        assert summary["hyperparameters"]["coregionalization"][PRICE][STORES] == (
            pytest.approx(model.coregionalization_[0, 1], rel=1e-6))
    else:
        assert len(summary["hyperparameters"]["terms"]) == 2
    for j, target in enumerate((PRICE, STORES)):
        # the marginal of target j, under the Gaussian measure of the training columns
        expected = gx.global_sensitivity(model.posterior_.marginal(j))
        rows = table[table["output"] == target]
        np.testing.assert_allclose(rows["shapley_effect"], expected.shapley_effects, rtol=1e-6)
        np.testing.assert_allclose(rows["total_std"], expected.total_std, rtol=1e-6)
        np.testing.assert_allclose(rows["shapley_index"].sum(), 1.0, rtol=1e-10)
        assert summary["variance_of_posterior_mean"][target] == pytest.approx(
            expected.total_variance, rel=1e-6)
    # the indices' covariance between the two targets, as the API gives it
    between = pd.read_csv(out / "index_correlations.csv")
    assert "index_correlations.csv" in summary["cross_output"]["note"]
    api = gx.global_sensitivity(model)
    for index in ("total", "shapley_effects"):
        rows = between[between["index"] == index]
        assert list(rows["feature"]) == FEATURES and set(rows["output_a"]) == {PRICE}
        np.testing.assert_allclose(rows["covariance"], api.index_covariance(index)[:, 0, 1],
                                   rtol=1e-5)
    assert np.all(np.abs(between["correlation"]) <= 1.0)


@pytest.mark.parametrize(
    ("options", "fragments"),
    [
        (["--target", PRICE, "--multi-output", "icm"],
         ["--multi-output icm applies to several --target columns"]),
        (["--target", PRICE, "--target", STORES, "--multi-output", "icm", "--kernel",
          "isotropic"], ["use --kernel ard, not isotropic"]),
        (["--target", PRICE, "--target", "flag"], ["'flag' holds class labels"]),
        (["--target", PRICE, "--target", PRICE], ["is given more than once"]),
        (["--target", PRICE, "--target", STORES, "--multi-output", "slfm"],
         ["unknown --multi-output 'slfm'"]),
        (["--target", PRICE, "--target", STORES, "--drop", STORES],
         ["--drop removes the target column"]),
        (["--target", PRICE, "--target", STORES, "--multi-output", "icm", "--rank", "3"],
         ["--rank 3 is above the number of --target columns, 2"]),
        (["--target", PRICE, "--target", STORES, "--rank", "2"],
         ["--rank applies to --multi-output icm"]),
        (["--target", PRICE, "--target", STORES, "--n-components", "2"],
         ["--n-components applies to --multi-output lmc"]),
    ],
)
def test_sensitivity_refusals_are_one_line_with_exit_code_2(options, fragments, taipei_csv,
                                                            tmp_path):
    # text labels: sensitivity analyses numbers (integer codes are numbers there)
    _assert_refused("sensitivity", taipei_csv, tmp_path,
                    lambda many: np.where(many, "many", "few"), options, fragments)


def test_rank_fits_the_icm_of_that_rank_and_is_saved_with_the_model(taipei_csv, tmp_path):
    """--rank 1: the ICM GPRegressor(multi_output="icm", rank=1) of the same rows (B = w w^T +
    diag(v), not the full-rank fit's B); --save-model keeps it, --model-from explains with it
    and refuses a new --rank; sensitivity takes it too."""
    options = ["--target", PRICE, "--target", STORES, "--multi-output", "icm", "--rank", "1"]
    out = _run(taipei_csv, tmp_path / "rank1", *options, "--no-holdout",
               "--save-model", tmp_path / "saved")
    frame = pd.read_csv(taipei_csv)
    Y = frame[[PRICE, STORES]]
    ranked = gx.GPRegressor(multi_output="icm", rank=1).fit(frame[FEATURES], Y)
    full = gx.GPRegressor(multi_output="icm").fit(frame[FEATURES], Y)
    fitted = json.loads((out / "summary.json").read_text())["hyperparameters"]
    assert fitted["rank"] == 1
    written = np.array([[fitted["coregionalization"][a][b] for b in (PRICE, STORES)]
                        for a in (PRICE, STORES)])
    np.testing.assert_allclose(written, ranked.coregionalization_, rtol=1e-6)
    assert not np.allclose(written, full.coregionalization_, rtol=1e-3)
    assert json.loads((tmp_path / "saved" / "cli.json").read_text())["rank"] == 1
    assert gx.load(tmp_path / "saved").rank == 1
    again = _run(taipei_csv, tmp_path / "again", "--model-from", tmp_path / "saved")
    pd.testing.assert_frame_equal(pd.read_csv(out / "attributions.csv"),
                                  pd.read_csv(again / "attributions.csv"))
    assert json.loads((again / "summary.json").read_text())["hyperparameters"]["rank"] == 1
    refused = invoke("explain", taipei_csv, "--model-from", tmp_path / "saved", "--rank", "2",
                     "--out", tmp_path / "refused")
    assert refused.exit_code == 2 and "--rank" in refused.stderr
    sensitivity = _sensitivity(taipei_csv, tmp_path / "sens", *options)
    summary = json.loads((sensitivity / "summary.json").read_text())
    assert summary["hyperparameters"]["rank"] == 1
    expected = gx.global_sensitivity(ranked.posterior_.marginal(1))
    rows = pd.read_csv(sensitivity / "sensitivity.csv").query("output == @STORES")
    np.testing.assert_allclose(rows["shapley_effect"], expected.shapley_effects, rtol=1e-6)


def test_the_importance_between_targets_groups_a_text_columns_indicators(taipei_csv, tmp_path):
    """With a text column the joint covariance across rows and targets is grouped from its
    one-hot indicators into the column, target by target: each target's own importance std
    (its Attribution grouped on its own, a different route) is the diagonal."""
    frame = pd.read_csv(taipei_csv)
    frame["age band"] = np.where(frame["X2 house age"] > 15, "old", "new")
    path = tmp_path / "with_text.csv"
    frame.to_csv(path, index=False)
    out = _run(path, tmp_path / "icm", "--target", PRICE, "--target", STORES,
               "--multi-output", "icm", "--no-holdout")
    summary = json.loads((out / "summary.json").read_text())
    between = pd.read_csv(out / "importance_correlations.csv")
    columns = FEATURES + ["age band"]
    assert sorted(between["feature"]) == sorted(columns)
    correlation = between.set_index("feature")["correlation"]
    covariance = between.set_index("feature")["covariance"]
    std = {target: summary["global_importance"][target]["std"] for target in (PRICE, STORES)}
    for column in columns:
        bound = std[PRICE][column] * std[STORES][column]
        assert abs(covariance[column]) <= bound * (1 + 1e-9)
        np.testing.assert_allclose(correlation[column], covariance[column] / bound, rtol=1e-6)


def test_grouped_importance_between_targets_against_monte_carlo():
    """methods.importance_between groups the joint covariance across rows and targets from a
    text column's indicators into the column: numeric columns equal the ungrouped result, and
    the text column's covariance between targets matches Monte Carlo over joint draws of the
    attributions, grouped here by summing the indicators' draws."""
    from gpexplain.cli import methods
    from gpexplain.encoding import CategoricalEncoder
    from gpexplain.explain.global_importance import importance_of

    rng = np.random.default_rng(4)
    X = pd.DataFrame({"a": rng.normal(size=16), "b": rng.normal(size=16),
                      "kind": rng.choice(["p", "q", "r"], size=16)})
    encoder = CategoricalEncoder().fit(X)
    encoded_X = encoder.transform(X)
    shift = encoded_X.filter(like="kind").to_numpy() @ np.array([0.0, 1.0, -1.0])
    Y = np.column_stack([np.sin(X["a"]) + shift, X["a"] * X["b"] + 0.5 * shift])
    Y = Y + 0.3 * rng.normal(size=Y.shape)  # noisy, so that the attributions are uncertain
    model = gx.GPRegressor(multi_output="icm").fit(encoded_X, Y)
    rows = encoded_X.iloc[:5]
    encoded = gx.integrated_gradients(model, rows, return_cov="points")
    grouped = {name: encoder.group(encoded[name], X.iloc[:5]) for name in encoded.output_names}
    result, why = methods.importance_between(encoded, grouped, encoder)
    assert why == "" and result is not None
    names = result.feature_names
    covariance = result.importance_covariance()  # (columns, 2, 2)
    ungrouped = importance_of(encoded, "mean_abs").importance_covariance()
    for column in ("a", "b"):
        np.testing.assert_allclose(covariance[names.index(column)],
                                   ungrouped[list(encoded.feature_names).index(column)],
                                   rtol=1e-12)
    # Monte Carlo: joint draws of every (row, target, indicator) value, indicators summed
    mean = encoded.mean  # (rows, targets, D)
    dense = encoded.point_cov_dense()  # (rows, targets, D, rows, targets, D)
    size = mean.size
    draws = rng.multivariate_normal(mean.reshape(-1), dense.reshape(size, size), size=100_000,
                                    method="eigh").reshape((-1,) + mean.shape)
    indicators = [list(encoded.feature_names).index(name) for name in encoder.groups_["kind"]]
    column = np.abs(draws[..., indicators].sum(-1)).mean(1)  # (draws, targets)
    centred = column - column.mean(0)
    products = centred[:, 0] * centred[:, 1]
    z = abs(products.mean() - covariance[names.index("kind"), 0, 1]) / (
        products.std() / np.sqrt(len(products)))
    assert z < 5.0, z
    assert abs(covariance[names.index("kind"), 0, 1]) > 10 * products.std() / np.sqrt(
        len(products))
