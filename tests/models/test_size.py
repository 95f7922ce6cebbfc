"""An exact GP too large for memory is refused before it fits, a slow one is announced (issue
27, item 13): the available memory and the time threshold are lowered, so the data stay tiny."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import gpexplain as gx
from gpexplain.cli import app
from gpexplain.models import _size


def _data(n=30):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    return X, X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=n)


def test_exact_gp_larger_than_memory_is_refused_naming_the_alternatives(monkeypatch):
    monkeypatch.setattr(_size, "available_memory", lambda: 10_000)
    X, y = _data()
    with pytest.raises(ValueError, match=r"exact GP on 30 rows needs about 0.0 GiB") as caught:
        gx.GPRegressor().fit(X, y)
    assert "SparseGPRegressor (--model sparse)" in str(caught.value)
    assert "--model random-features" in str(caught.value)


def test_slow_exact_fit_warns_with_the_estimate_and_numbers_do_not_change(monkeypatch):
    X, y = _data()
    before = gx.GPRegressor(n_restarts=0).fit(X, y)
    monkeypatch.setattr(_size, "SLOW_FIT_SECONDS", 0.0)
    with pytest.warns(UserWarning, match=r"the exact GP on 30 rows will take about 0 minutes"):
        after = gx.GPRegressor(n_restarts=0).fit(X, y)
    assert after.log_marginal_likelihood_value_ == before.log_marginal_likelihood_value_
    assert _size.exact_fit_estimate(1000) == (40_000_000, pytest.approx(8.33, abs=0.01))


def test_cli_refuses_an_exact_gp_too_large_in_one_line(tmp_path, monkeypatch):
    X, y = _data()
    path = tmp_path / "d.csv"
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "y": y}).to_csv(path, index=False)
    monkeypatch.setattr(_size, "available_memory", lambda: 10_000)
    result = CliRunner().invoke(
        app, ["explain", str(path), "--target", "y", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "--model sparse" in result.output
