"""The command line's classification mode: task guess, per-class attributions, held-out
accuracy, log loss and Brier score."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import brier_score_loss, log_loss
from typer.testing import CliRunner

import gpexplain as gx
from gpexplain.cli import app
from gpexplain.cli.classification import holdout_metrics
from gpexplain.cli.tasks import guess_task
from gpexplain.models.families import FAMILIES

runner = CliRunner()
FAST = ["--model", "sparse", "--n-inducing", "8", "--rows", "0:3"]
MAX_ITER = 30


@pytest.fixture(autouse=True)
def short_fits(monkeypatch):
    """At most 30 L-BFGS iterations: fit quality is not the subject of these tests (the
    command line itself is unchanged)."""
    classifier = FAMILIES.get("classifier")
    parameters = classifier.parameters
    monkeypatch.setattr(classifier, "parameters",
                        lambda settings: {**parameters(settings), "max_iter": MAX_ITER})


@pytest.fixture
def xlabels(monkeypatch):
    """The x-axis labels of every attribution and importance figure a run draws."""
    import gpexplain.plot

    drawn = []

    def recording(plot):
        def draw(*args, **kwargs):
            figure = plot(*args, **kwargs)
            drawn.extend(axis.get_xlabel() for axis in figure.axes if axis.get_xlabel())
            return figure
        return draw

    for name in ("plot_attributions", "plot_global_importance"):
        monkeypatch.setattr(gpexplain.plot, name, recording(getattr(gpexplain.plot, name)))
    return drawn


def _frame(labels, n_rows=40, seed=0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"a": rng.normal(size=n_rows), "b": rng.normal(size=n_rows),
                          "c": rng.normal(size=n_rows)})
    frame["y"] = labels(frame)
    return frame


def _run(tmp_path, frame, *options):
    data = tmp_path / "data.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["explain", str(data), "--target", "y", "--out", str(out), *map(str, options)]
    )
    return result, out


@pytest.mark.parametrize(
    ("values", "task"),
    [
        (["yes", "no"] * 5, "classification"),
        ([True, False] * 5, "classification"),
        ([0, 1, 2, 1, 0], "classification"),
        ([1, 2, 3, 2], "classification"),
        ([4, 5, 6, 7, 8], "regression"),  # wine-quality scores stay a regression target
        ([0.5, 1.0, 2.0], "regression"),
        (list(range(12)), "regression"),
    ],
)
def test_task_guess(values, task):
    assert guess_task(pd.Series(values), "auto") == task
    other = "regression" if task == "classification" else "classification"
    assert guess_task(pd.Series(values), other) == other


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ([f"{i},5" for i in range(60)] * 2, "text with 60 classes (more than 50"),
        ([f"id{i}" for i in range(20)], "20 distinct values in 20 rows, like an identifier"),
    ],
)
def test_task_guess_refuses_text_targets_no_classifier_can_fit(values, fragment):
    target = pd.Series(values, name="y")
    with pytest.raises(ValueError, match=r"'y' is .*--task classification") as refused:
        guess_task(target, "auto")
    assert fragment in str(refused.value)
    assert guess_task(target, "classification") == "classification"  # insisting works


def test_explain_refuses_a_many_class_text_target_before_fitting(tmp_path):
    data = tmp_path / "csv2.csv"  # a numeric target read as text, as on a decimal-comma file
    data.write_text("a,y\n" + "".join(f"{i},x{i % 70}\n" for i in range(140)))
    result = runner.invoke(app, ["explain", str(data), "--target", "y", "--out",
                                 str(tmp_path / "out")])
    assert result.exit_code == 2 and "70 classes" in result.stderr
    assert result.stderr.count("\n") == 1


def test_binary_text_target_gets_per_class_outputs(tmp_path, xlabels):
    frame = _frame(lambda f: np.where(f["a"] + 0.5 * f["b"] > 0, "malignant", "benign"))
    result, out = _run(tmp_path, frame, *FAST)
    assert result.exit_code == 0, result.output + repr(result.exception)
    # the figures are of the latent log-odds, which a class label has no units for
    assert xlabels and all("latent log-odds of class 'malignant'" in label for label in xlabels)
    for name in ("attributions.csv", "summary.json", "attributions_malignant.png",
                 "importance_malignant.png"):
        assert (out / name).is_file(), name
    table = pd.read_csv(out / "attributions.csv")
    assert list(table.columns[:3]) == ["row", "class", "point"]
    assert set(table["class"]) == {"malignant"}  # the log-odds of the second class
    summary = json.loads((out / "summary.json").read_text())
    assert summary["task"] == "classification" and summary["classes"] == ["benign", "malignant"]
    assert summary["link"] == "logit" and "r2" not in summary["holdout"]
    assert set(summary["hyperparameters"]) == {"malignant"}
    assert set(summary["hyperparameters"]["malignant"]["lengthscales"]) == {"a", "b", "c"}
    holdout = summary["holdout"]
    assert 0.8 <= holdout["accuracy"] <= 1 and holdout["log_loss"] > 0
    assert 0 <= holdout["brier_score"] <= 2
    assert summary["completeness_gap"]["malignant"]["mean"] < 1e-8
    # the exact global importance of the latent (issue 25), by Jensen at least the plug-in
    importance = summary["global_importance"]["malignant"]
    plug_in = table.assign(size=table["attribution"].abs()).groupby("feature")["size"].mean()
    for name in ("a", "b", "c"):
        assert importance["mean"][name] >= plug_in[name] - 1e-12 and importance["std"][name] > 0
    # Attributions sum to the latent at the row minus the latent at the baseline.
    per_row = table.groupby("point")["attribution"].sum()
    features = frame[["a", "b", "c"]]
    fitted = gx.GPClassifier(n_inducing=8, max_iter=MAX_ITER).fit(features, frame["y"])
    latent = fitted.decision_function(features.iloc[:3])
    expected = latent - summary["baseline"]["prediction"]["malignant"]
    np.testing.assert_allclose(per_row.to_numpy(), expected, atol=1e-6)
    # The probability-level column sums to E[p(row)] - E[p(baseline)], and E[p(row)] is the
    # model's own predicted probability of the class.
    probability = table.groupby("point")["probability_attribution"].sum().to_numpy()
    expected_p = np.asarray(summary["expected_probability"]["malignant"])
    baseline_p = summary["baseline_expected_probability"]["malignant"]
    np.testing.assert_allclose(probability, expected_p - baseline_p, atol=1e-10)
    np.testing.assert_allclose(expected_p, fitted.predict_proba(features.iloc[:3])[:, 1],
                               atol=1e-10)


def test_integer_coded_classes_and_task_override(tmp_path, xlabels):
    frame = _frame(lambda f: np.digitize(f["a"], [-0.5, 0.5]))
    result, out = _run(tmp_path, frame, *FAST, "--no-holdout")
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert {label.split("(")[1].split("\n")[0] for label in xlabels} == {
        f"latent f of class '{c}', the softmax input)" for c in (0, 1, 2)}
    table = pd.read_csv(out / "attributions.csv")
    assert sorted(set(table["class"])) == [0, 1, 2]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["link"] == "softmax" and set(summary["hyperparameters"]) == {"0", "1", "2"}
    assert summary["holdout"]["accuracy"] is None
    for name in ("attributions_2.png", "importance_0.png"):
        assert (out / name).is_file()

    result, out = _run(tmp_path, frame, *FAST, "--no-holdout", "--task", "regression")
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert "task" not in summary and "r2" in summary["holdout"]


def test_text_feature_with_text_target_writes_every_output(tmp_path):
    """A text feature beside a text target: the summary records the model's indicator
    columns (numbers), not the per-category baseline mappings of the table, and the run
    finishes with every file (it used to crash writing summary.json after the fit)."""
    frame = _frame(lambda f: np.where(f["a"] > 0, "yes", "no"), n_rows=16)
    frame["c"] = np.where(frame["c"] > 0, "red", "blue")
    result, out = _run(tmp_path, frame, *FAST, "--no-holdout")
    assert result.exit_code == 0, result.output + repr(result.exception)
    for name in ("attributions.csv", "summary.json", "attributions_yes.png"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    indicators = ["c_blue", "c_red"]
    assert summary["categorical_columns"] == {"c": indicators}
    assert summary["feature_names"] == ["a", "b", *indicators]
    assert set(summary["hyperparameters"]["yes"]["lengthscales"]) == {"a", "b", *indicators}
    # the default baseline is the typical row: the most frequent category of c
    counts = frame["c"].value_counts()
    mode = "blue" if counts["blue"] >= counts["red"] else "red"
    assert summary["baseline"]["spec"] == "typical"
    assert [summary["baseline"]["vector"][f"c_{c}"] for c in ("blue", "red")] == \
        [float(c == mode) for c in ("blue", "red")]
    assert summary["baseline"]["vector"]["a"] == pytest.approx(frame["a"].mean(), rel=1e-12)
    table = pd.read_csv(out / "attributions.csv")
    assert list(dict.fromkeys(table["feature"])) == ["a", "b", "c"]
    of_mode = table[(table["feature"] == "c") & (table["value"] == mode)]
    assert len(of_mode) and np.all(of_mode["attribution"] == 0.0)  # x_c equals the baseline's

    frequencies = frame["c"].value_counts(normalize=True)
    result, out = _run(tmp_path, frame, *FAST, "--no-holdout", "--baseline", "mean", "--force")
    assert result.exit_code == 0, result.output + repr(result.exception)
    summary = json.loads((out / "summary.json").read_text())
    assert [summary["baseline"]["vector"][f"c_{c}"] for c in ("blue", "red")] == \
        pytest.approx([frequencies["blue"], frequencies["red"]])


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (["--model", "gpx"], "--model gpx is a regression model"),
        (["--task", "ordinal"], "unknown --task 'ordinal'"),
        (["--workers", "2"], "--dask-scheduler and --workers apply to regressions"),
        (["--method", "shapley", "--kernel", "matern52"], "--method shapley needs a product"),
    ],
)
def test_bad_classification_options_exit_2(tmp_path, options, fragment):
    frame = _frame(lambda f: np.where(f["a"] > 0, "x", "z"))
    result, _ = _run(tmp_path, frame, *options)
    assert result.exit_code == 2 and fragment in result.stderr, result.output


def test_text_target_refused_for_regression(tmp_path):
    frame = _frame(lambda f: np.where(f["a"] > 0, "x", "z"))
    result, _ = _run(tmp_path, frame, "--task", "regression")
    assert result.exit_code == 2 and "--task classification" in result.stderr


def test_holdout_metrics_match_sklearn():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 2))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=40) > 0, "b", "a")
    model = gx.GPClassifier(n_inducing=6, max_iter=20).fit(X[:30], y[:30])
    metrics = holdout_metrics(model, X[30:], y[30:])
    p = model.predict_proba(X[30:])
    assert metrics["accuracy"] == pytest.approx(np.mean(model.predict(X[30:]) == y[30:]))
    assert metrics["log_loss"] == pytest.approx(log_loss(y[30:], p), rel=1e-12)
    binary = brier_score_loss(y[30:] == "b", p[:, 1])
    assert metrics["brier_score_binary"] == pytest.approx(binary, rel=1e-12)
    assert metrics["brier_score"] == pytest.approx(2 * binary, rel=1e-12)


@pytest.mark.parametrize(("labels", "game"), [
    (lambda f: np.where(f["a"] + 0.5 * f["b"] > 0, "malignant", "benign"), "baseline"),
    (lambda f: np.digitize(f["a"], [-0.5, 0.5]), "interventional"),
])
def test_shapley_values_per_class_on_the_latent(tmp_path, labels, game):
    frame = _frame(labels)
    background = ["--background", "5"] if game == "interventional" else []
    result, out = _run(tmp_path, frame, "--method", "shapley", "--game", game, *background,
                       "--rows", "0:3", "--no-holdout")
    assert result.exit_code == 0, result.output + repr(result.exception)
    table = pd.read_csv(out / "attributions.csv")
    summary = json.loads((out / "summary.json").read_text())
    assert "probability_attribution" not in table.columns  # no probability-level game
    assert "expected_probability" not in summary
    assert f"exact Shapley values ({game} game)" in summary["explained_output"]
    features = frame[["a", "b", "c"]]
    fitted = gx.GPClassifier(max_iter=MAX_ITER).fit(  # the command line's default
        features, frame["y"])
    latents = fitted.decision_function(features.iloc[:3])
    latents = latents[:, None] if latents.ndim == 1 else latents
    for column, label in enumerate(summary["explained_classes"]):
        if fitted.link_ != "softmax":
            column = 0
            assert summary["method"].endswith(f"of the latent log-odds of class '{label}'")
        rows = table[table["class"] == label]
        assert summary["completeness_gap"][str(label)]["mean"] < 1e-8
        # completeness against the classifier's own latent and the written base value
        expected = latents[:, column] - summary["baseline"]["prediction"][str(label)]
        np.testing.assert_allclose(rows.groupby("point")["attribution"].sum().to_numpy(),
                                   expected, atol=1e-6)


def test_report_save_model_and_model_from_in_classification_mode(tmp_path, monkeypatch):
    frame = _frame(lambda f: np.where(f["a"] + 0.5 * f["b"] > 0, "malignant", "benign"))
    saved = tmp_path / "model"
    result, out = _run(tmp_path, frame, *FAST, "--save-model", saved, "--report")
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert "report.html" in result.output and "the fitted model" in result.output
    page = (out / "report.html").read_text(encoding="utf-8")
    for fragment in ("Global importance of class malignant", "accuracy <b>",
                     "Completeness checks of class malignant", "latent logit of class"):
        assert fragment in page, fragment
    assert "violated" not in page
    first = pd.read_csv(out / "attributions.csv")
    # The saved classifier explains the same rows alike, without refitting (and gx.load needs
    # the real class back in place of the short-fit stand-in).
    monkeypatch.undo()
    again = tmp_path / "again"
    result = runner.invoke(app, ["explain", str(tmp_path / "data.csv"), "--model-from",
                                 str(saved), "--rows", "0:3", "--out", str(again)])
    assert result.exit_code == 0, result.output + repr(result.exception)
    second = pd.read_csv(again / "attributions.csv")
    pd.testing.assert_frame_equal(first, second, check_exact=False, rtol=1e-12, atol=1e-14)
    summary = json.loads((again / "summary.json").read_text())
    assert summary["task"] == "classification"
    assert summary["holdout"]["skipped"] == "model loaded with --model-from"


def test_n_inducing_applies_to_the_default_classifier(tmp_path, monkeypatch):
    classifier = FAMILIES.get("classifier")
    built, parameters = [], classifier.parameters
    monkeypatch.setattr(classifier, "parameters",
                        lambda settings: built.append(parameters(settings)) or built[-1])
    frame = _frame(lambda f: np.where(f["a"] > 0, "yes", "no"))
    result, _ = _run(tmp_path, frame, "--n-inducing", "8", "--rows", "0:3")
    assert result.exit_code == 0, result.output
    assert built and all(entry["n_inducing"] == 8 for entry in built)
    # A regression target's exact GP has no inducing points: refused, naming who takes them.
    frame["y"] = frame["a"] + frame["b"]
    result, _ = _run(tmp_path, frame, "--n-inducing", "8", "--rows", "0:3")
    assert result.exit_code == 2
    assert "--n-inducing applies to --model sparse and to the classifier" in result.output
