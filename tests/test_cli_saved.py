"""``gpexplain explain --save-model DIR`` and ``--model-from DIR``: new rows explained with a
saved model, without refitting, identically to the run that fitted it."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import gpexplain as gx
from gpexplain.cli import stages
from tests.test_cli import assert_ok, invoke, single_start, small_frame  # noqa: F401

pytestmark = pytest.mark.usefixtures("single_start")  # fit quality is not the subject


@pytest.fixture
def no_fit_after_save(monkeypatch):
    """After the first run, any fit is a failure: --model-from must not refit."""

    def refuse(*args, **kwargs):
        raise AssertionError("--model-from fitted a model")

    return lambda: monkeypatch.setattr(stages, "fit", refuse)


@pytest.mark.parametrize(
    "options",
    [
        ("--model", "exact"),
        pytest.param(("--model", "additive"), marks=pytest.mark.slow),
        pytest.param(("--model", "gpx"), marks=pytest.mark.slow),
    ],
)
def test_saved_model_explains_new_rows_identically(tmp_path, no_fit_after_save, options):
    frame = small_frame()
    data = tmp_path / "train.csv"
    frame.to_csv(data, index=False)
    saved, first = tmp_path / "model", tmp_path / "first"
    assert_ok(invoke("explain", data, "--target", "y", "--rows", "0:6", *options,
                     "--no-holdout", "--save-model", saved, "--out", first))
    assert (saved / "cli.json").is_file() and (saved / "gpexplain.json").is_file()
    no_fit_after_save()

    # New rows, columns in another order and without the target: matched by name.
    new_rows = tmp_path / "new.csv"
    frame.iloc[:6][["c", "b", "a"]].to_csv(new_rows, index=False)
    second = tmp_path / "second"
    result = invoke("explain", new_rows, "--model-from", saved, "--rows", "all", "--out", second)
    assert_ok(result)
    before = pd.read_csv(first / "attributions.csv")
    after = pd.read_csv(second / "attributions.csv")
    pd.testing.assert_frame_equal(after, before)
    summary = json.loads((second / "summary.json").read_text())
    assert summary["model"] == options[1]
    assert summary["holdout"]["skipped"] == "model loaded with --model-from"
    assert summary["timings_seconds"]["fit"] is None
    # The same directory loads in Python.
    assert isinstance(gx.load(saved), gx.GPRegressor | gx.AdditiveGPRegressor | gx.GPXRegressor)


def _saved_exact_model(tmp_path):
    """(data file, saved model directory) of an exact GP fitted on ``small_frame``."""
    data, saved = tmp_path / "train.csv", tmp_path / "model"
    small_frame().to_csv(data, index=False)
    assert_ok(invoke("explain", data, "--target", "y", "--rows", "0:2", "--no-holdout",
                     "--save-model", saved, "--out", tmp_path / "out"))
    return data, saved


def test_model_from_refuses_mismatched_columns_and_options(tmp_path):
    data, saved = _saved_exact_model(tmp_path)
    frame = small_frame()
    other = tmp_path / "other.csv"
    frame.rename(columns={"c": "d"}).to_csv(other, index=False)
    result = invoke("explain", other, "--model-from", saved, "--out", tmp_path / "o2")
    assert result.exit_code == 2
    assert "missing 'c'" in result.stderr and "not in the model 'd'" in result.stderr
    result = invoke("explain", data, "--model-from", saved, "--model", "sparse")
    assert result.exit_code == 2 and "--model-from uses the saved model" in result.stderr
    result = invoke("explain", data, "--model-from", tmp_path / "nothing")
    assert result.exit_code == 2 and "no gpexplain save" in result.stderr
    result = invoke("explain", data)
    assert result.exit_code == 2 and "--target is required" in result.stderr


def test_model_from_keeps_the_shapley_game(tmp_path, no_fit_after_save):
    data, saved = _saved_exact_model(tmp_path)
    no_fit_after_save()
    out = tmp_path / "second"
    assert_ok(invoke("explain", data, "--model-from", saved, "--rows", "0:2", "--method",
                     "shapley", "--game", "baseline", "--out", out))
    summary = json.loads((out / "summary.json").read_text())
    assert "baseline game" in summary["method"]  # --game was dropped: the default game ran


def test_model_from_keeps_rows_missing_only_their_target(tmp_path, no_fit_after_save):
    """A saved model needs no target: ``--missing drop`` drops rows missing a feature only."""
    _, saved = _saved_exact_model(tmp_path)
    no_fit_after_save()
    frame = small_frame().iloc[:6].copy()
    frame.loc[2, "y"] = float("nan")
    frame.loc[4, "a"] = float("nan")
    data = tmp_path / "new.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "second"
    result = invoke("explain", data, "--model-from", saved, "--missing", "drop", "--rows",
                    "all", "--out", out)
    assert_ok(result)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["missing"]["dropped_rows"] == [4]
    assert summary["explained_rows"] == [0, 1, 2, 3, 5]


def test_saved_model_of_a_table_with_text_keeps_its_encoder_and_missing_policy(
        tmp_path, no_fit_after_save):
    """``--save-model`` on text columns saves the encoder (as a fitted ``gx.make_pipeline``)
    and the ``--missing`` policy: ``--model-from`` explains the very same file alike."""
    frame = small_frame(n_rows=24)
    frame["c"] = np.where(frame["c"] > 0, "high", "low")
    frame.loc[5, "a"] = np.nan
    data, saved, first = tmp_path / "train.csv", tmp_path / "model", tmp_path / "first"
    frame.to_csv(data, index=False)
    assert_ok(invoke("explain", data, "--target", "y", "--rows", "0:4", "--missing", "drop",
                     "--no-holdout", "--save-model", saved, "--out", first))
    assert json.loads((saved / "cli.json").read_text())["missing"] == "drop"
    no_fit_after_save()
    second = tmp_path / "second"
    assert_ok(invoke("explain", data, "--model-from", saved, "--rows", "0:4", "--out", second))
    before = pd.read_csv(first / "attributions.csv")
    pd.testing.assert_frame_equal(pd.read_csv(second / "attributions.csv"), before)
    assert set(before["feature"]) == {"a", "b", "c"}
    summary = json.loads((second / "summary.json").read_text())
    assert summary["missing"] == {"policy": "drop", "dropped_rows": [5]}
    # In Python the directory is the fitted pipeline, text columns and all.
    pipeline = gx.load(saved)
    assert isinstance(pipeline, gx.CategoricalPipeline)
    assert pipeline.encoder_.categorical_ == ["c"]
    # A category the fit never saw is refused by name, not encoded as nothing.
    other = tmp_path / "other.csv"
    frame.assign(c="medium").to_csv(other, index=False)
    result = invoke("explain", other, "--model-from", saved, "--out", tmp_path / "third")
    assert result.exit_code == 2 and "'c' has categories ['medium']" in result.stderr
