"""``gpexplain poe``: files written, losses consistent with them, bad input exits with 2."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import gpexplain as gx
from gpexplain import cli
from gpexplain.cli import stages
from tests.test_cli import one_start

runner = CliRunner()


@pytest.fixture
def data(tmp_path, monkeypatch):
    one_start(monkeypatch)
    fitted = []
    fit = stages.fit

    def capture(*args, **kwargs):
        fitted.append(fit(*args, **kwargs))
        return fitted[-1]

    monkeypatch.setattr(stages, "fit", capture)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["y"] = np.sin(X[:, 0]) + X[:, 1] ** 2 / 3 + 0.05 * rng.normal(size=30)
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    return path, fitted


def invoke(*args):
    return runner.invoke(cli.app, [str(a) for a in args])


def test_poe_writes_explain_files_and_losses(data, tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    path, fitted = data
    out = tmp_path / "out"
    labels, savefig = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda figure, *args, **kwargs: (
        labels.extend(axis.get_xlabel() for axis in figure.axes),
        savefig(figure, *args, **kwargs))[1])
    result = invoke("poe", path, "--target", "y", "--lambda", "F_grad=1", "--lambda",
                    "R_avg=0.05", "--lambda", "C=0.2", "--rows", "0:10", "--out", out)
    assert result.exit_code == 0, result.output
    for name in ("attributions.csv", "summary.json", "losses.json", "attributions.png",
                 "importance.png"):
        assert (out / name).exists(), name
    losses = json.loads((out / "losses.json").read_text())
    table = pd.read_csv(out / "attributions.csv")
    W = table["weight"].to_numpy().reshape(10, 3)
    X = table["value"].to_numpy().reshape(10, 3)
    G, f = gx.poe.gradients_and_values(fitted[0], X)
    recomputed = gx.poe.losses(W, X, G, f)
    for name, value in recomputed.items():
        assert losses["losses"][name] == pytest.approx(value, rel=1e-9), name
    assert losses["objective"] == pytest.approx(
        recomputed["F_grad"] + 0.05 * recomputed["R_avg"] + 0.2 * recomputed["C"], rel=1e-9)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["poe"]["lambdas"]["C"] == 0.2
    # Weights, not a posterior of a decomposition: no intervals, no completeness gap.
    assert list(table.columns) == ["row", "point", "feature", "value", "weight"]
    assert "completeness_gap" not in summary and "interval_level" not in summary
    assert summary["explanation"].startswith("gradient-like local weights")
    assert labels and all("local weight" in label and "per unit of the feature" in label
                          for label in labels)
    # the report cites POE's paper, not the integrated-gradients one
    assert summary["method_id"] == "poe"
    assert [reference.title in text for reference, text
            in zip(gx.poe.REFERENCES, summary["references"], strict=True)] == [True]


def test_faithfulness_only_returns_the_gp_gradient(data, tmp_path):
    path, fitted = data
    out = tmp_path / "grad"
    result = invoke("poe", path, "--target", "y", "--rows", "3,7", "--out", out)
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "attributions.csv")
    X = table["value"].to_numpy().reshape(2, 3)
    gradient = gx.gradients(fitted[0], X, return_cov=False).mean
    assert np.allclose(table["weight"].to_numpy().reshape(2, 3), gradient, atol=1e-12)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--lambda", "R=1"], "NAME=VALUE"),
        (["--lambda", "F_grad=x"], "not a number"),
        (["--lambda", "C=-1"], "cannot be negative"),
        (["--similarity", "cosine"], "--similarity must be one of"),
        (["--similarity", "gaussian"], "needs --lengthscale"),
    ],
)
def test_bad_options_exit_with_code_2(data, tmp_path, arguments, message):
    path, _ = data
    result = invoke("poe", path, "--target", "y", "--out", tmp_path / "bad", *arguments)
    assert result.exit_code == 2
    assert message in result.output
