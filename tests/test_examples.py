"""The example scripts run end to end and write their figures."""

import json
import runpy
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "figure"),
    [
        ("synthetic_heteroscedasticity.py", "synthetic_heteroscedasticity.png"),
        # Over a minute each on 2 cores: in `make test-long`, which CI runs after `make test`.
        pytest.param("taipei_affine_scale_invariance.py", "taipei_attributions.png",
                     marks=pytest.mark.long),
        pytest.param("digits_classifier.py", "digits_10class.png", marks=pytest.mark.long),
    ],
)
def test_example_runs(script, figure, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [script, "--out", str(tmp_path)])
    runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    assert (tmp_path / figure).is_file()
    output = capsys.readouterr().out
    if script.startswith("taipei"):
        difference = float(output.split("largest difference of attribution means: ")[1].split()[0])
        # Two independent fits (README: about 5e-3); the exact invariance of the explanation
        # itself is tested in tests/explain at 1e-10.
        assert difference < 1e-2
    if script.startswith("digits"):
        accuracies = [float(line.split("accuracy ")[1]) for line in output.splitlines()
                      if "held-out accuracy" in line]
        assert len(accuracies) == 3 and min(accuracies[:2]) > 0.95 and accuracies[2] > 0.85


@pytest.mark.slow
def test_wdbc_example_runs(data_dir, tmp_path, monkeypatch, capsys):
    data = data_dir / "breast_cancer_wisconsin" / "wdbc.data"
    script = "wdbc_diagnosis.py"
    monkeypatch.setattr(sys, "argv", [script, "--out", str(tmp_path), "--data", str(data)])
    runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    assert (tmp_path / "wdbc_importance.png").is_file()
    output = capsys.readouterr().out
    ours, theirs = (float(part.split()[-1]) for part in
                    output.split("held-out accuracy: ")[1].splitlines()[0].split(","))
    assert ours >= theirs - 0.02
    assert float(output.split("completeness gap")[1].split(": ")[1].split()[0]) < 1e-8


@pytest.mark.slow
def test_breast_cancer_prognosis_example(data_dir, tmp_path, monkeypatch, capsys):
    script = "breast_cancer_prognosis.py"
    data = data_dir / "breast_cancer_wisconsin" / "wpbc.data"
    monkeypatch.setattr(sys, "argv", [script, "--data", str(data), "--out", str(tmp_path)])
    runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    output = capsys.readouterr().out
    assert "151 of 198 patients have outcome N" in output
    for name in ("wpbc_patient.png", "wpbc_two_features.png", "wpbc-explain/report.html"):
        assert (tmp_path / name).is_file()
    summary = json.loads((tmp_path / "wpbc-explain" / "summary.json").read_text())
    assert summary["target"] == "time" and len(summary["feature_names"]) == 30
    assert summary["baseline"]["spec"] == "mean" and len(summary["explained_rows"]) == 50
    table = pd.read_csv(tmp_path / "wpbc-explain" / "attributions.csv")
    sums = table.groupby("point")["attribution"].sum().to_numpy()
    predictions = np.asarray(summary["predictions"])
    scale = np.abs(table["attribution"]).max()
    np.testing.assert_allclose(  # completeness from the average patient, row by row
        sums, predictions - summary["baseline"]["prediction"], atol=1e-8 * scale
    )
