"""``gpexplain explain --explain variance``: the posterior variance's attributions written
beside the mean's, complete, and refused by name where they do not apply."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.test_cli import assert_ok, invoke, one_start, small_frame


@pytest.fixture(autouse=True)
def single_start(monkeypatch):
    one_start(monkeypatch)


@pytest.mark.parametrize("method", ["ig", "shapley"])
def test_variance_attributions_are_written_beside_the_means(tmp_path, method):
    data = tmp_path / "small.csv"
    small_frame(30).to_csv(data, index=False)
    out = tmp_path / "out"
    game = ["--background", 5] if method == "shapley" else []
    result = invoke("explain", data, "--target", "y", "--rows", "0:3", "--no-holdout",
                    "--method", method, "--explain", "variance", *game, "--out", out)
    assert_ok(result)
    for name in ("attributions.csv", "variance_attributions.csv", "attributions_variance.png",
                 "importance_variance.png", "waterfall_variance.png", "variance.json"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "variance.json").read_text())
    assert summary["method"].startswith("posterior variance")
    assert ("interventional" in summary["method"]) == (method == "shapley")
    table = pd.read_csv(out / "variance_attributions.csv")
    totals = table.groupby("point")["attribution"].sum().to_numpy()
    np.testing.assert_allclose(totals, np.array(summary["posterior_variance"])
                               - summary["base_value"], atol=1e-10)
    assert (table["std"] == 0.0).all()
    assert summary["completeness_gap"] < 1e-10


def test_unknown_explain_value_is_one_line(tmp_path):
    data = tmp_path / "small.csv"
    small_frame(20).to_csv(data, index=False)
    result = invoke("explain", data, "--target", "y", "--explain", "uncertainty",
                    "--out", tmp_path / "out")
    assert result.exit_code == 2 and "--explain" in result.output


def test_report_shows_the_variance_attributions(tmp_path):
    data = tmp_path / "small.csv"
    small_frame(30).to_csv(data, index=False)
    out = tmp_path / "out"
    result = invoke("explain", data, "--target", "y", "--rows", "0:3", "--no-holdout",
                    "--explain", "variance", "--report", "--out", out)
    assert_ok(result)
    page = (out / "report.html").read_text()
    assert "Why the model is unsure: attributions of the posterior variance" in page
    variance = json.loads((out / "variance.json").read_text())
    for value in variance["posterior_variance"]:
        assert f"{value:.4g}" in page
    # From elsewhere, a variance.json's text is escaped like every other value.
    variance["method"] = "<script>alert(1)</script>"
    (out / "variance.json").write_text(json.dumps(variance))
    from gpexplain.report import write_report

    page = write_report(out).read_text()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
