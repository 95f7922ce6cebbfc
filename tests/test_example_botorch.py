"""examples/botorch_hartmann.py runs end to end (a short BoTorch loop) and writes its figures."""

import runpy
import sys
from pathlib import Path

import pytest

from tests.botorch_settings import unchanged_gpytorch_settings

with unchanged_gpytorch_settings():
    pytest.importorskip("botorch")
SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "botorch_hartmann.py"


@pytest.mark.slow
def test_botorch_hartmann_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [SCRIPT.name, "--out", str(tmp_path), "--iterations", "2"])
    runpy.run_path(str(SCRIPT), run_name="__main__")
    assert (tmp_path / "hartmann_importance.png").is_file()
    assert (tmp_path / "hartmann_best_point.png").is_file()
    output = capsys.readouterr().out
    gaps = output.split("completeness gap (mean, variance): ")[1].splitlines()[0]
    assert all(float(value) < 1e-8 for value in gaps.strip("{}").split(",") for value in
               [value.split(":")[1]])
