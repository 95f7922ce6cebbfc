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


def test_subsample_hyperparameters_lower_the_estimate_to_the_conditioning(monkeypatch):
    # 20,000 rows: five n x n matrices (14.9 GiB) to fit on all rows, three (8.9 GiB) to
    # condition on them after fitting 3,000.
    monkeypatch.setattr(_size, "available_memory", lambda: 12 * 2**30)
    with pytest.raises(ValueError, match=r"20000 rows needs about 14.9 GiB \(5 n x n"):
        _size.check_exact_size(20_000)
    _size.check_exact_size(20_000, fit_rows=3000)
    monkeypatch.setattr(_size, "available_memory", lambda: 8 * 2**30)
    with pytest.raises(ValueError, match=r"20000 rows needs about 8.9 GiB \(3 n x n"):
        _size.check_exact_size(20_000, fit_rows=3000)


def test_hyperparameters_on_a_subsample_posterior_on_every_row():
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(120, 2))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.normal(size=120)
    model = gx.GPRegressor(n_restarts=0, hyperparameter_rows=40).fit(X, y)
    assert model.hyperparameter_rows_ == 40
    # The posterior conditions on all 120 rows: its mean, written out here with NumPy from the
    # fitted hyperparameters alone, uses every row.
    lengthscale, variance = model.kernel_.lengthscale, model.kernel_.variance
    def k(A, B):
        return variance * np.exp(-0.5 * (((A[:, None] - B[None]) / lengthscale) ** 2).sum(-1))
    K = k(X, X) + model.noise_ * np.eye(120)
    X_new = rng.uniform(-2, 2, size=(5, 2))
    expected = model.mean_ + k(X_new, X) @ np.linalg.solve(K, y - model.mean_)
    np.testing.assert_allclose(model.predict(X_new), expected, rtol=1e-8, atol=1e-8)
    everything = gx.GPRegressor(n_restarts=0, hyperparameter_rows=500).fit(X, y)
    assert everything.hyperparameter_rows_ == 120
    np.testing.assert_array_equal(
        everything.kernel_.lengthscale, gx.GPRegressor(n_restarts=0).fit(X, y).kernel_.lengthscale)


def test_available_memory_takes_the_address_space_and_cgroup_limits(monkeypatch, tmp_path):
    """Under ``ulimit -v`` or a container's memory limit the check passed on the machine's
    free memory and the fit died with a raw MemoryError (bike, 17,379 rows, ulimit -v 6 GB:
    after 214 s); each limit now bounds the memory available."""
    import resource

    machine = _size.available_memory()
    monkeypatch.setattr(_size, "CGROUP_MEMORY_FILES", ())
    monkeypatch.setattr(resource, "getrlimit", lambda which: (machine // 2, machine // 2))
    left = _size.available_memory()
    assert 0 < left < machine // 2  # the limit less this process's own size
    monkeypatch.undo()
    for version, limit, usage, stat in [
        ("v2", "1073741824", "805306368", "anon 1\ninactive_file 268435456\n"),
        ("v1", "1073741824", "805306368", "cache 2\ntotal_inactive_file 268435456\n"),
    ]:
        folder = tmp_path / version
        folder.mkdir()
        (folder / "limit").write_text(limit + "\n")
        (folder / "usage").write_text(usage + "\n")
        (folder / "memory.stat").write_text(stat)
        key = "inactive_file" if version == "v2" else "total_inactive_file"
        monkeypatch.setattr(_size, "CGROUP_MEMORY_FILES", (
            (str(tmp_path / "absent" / "limit"), str(tmp_path / "absent" / "usage"), key),
            (str(folder / "limit"), str(folder / "usage"), key),
        ))
        assert _size.available_memory() == min(machine, 2**29), version  # 1 GiB - 768 + 256 MiB
        (folder / "limit").write_text("max\n")  # no limit
        assert _size.available_memory() >= min(machine, 2**30)


def test_cli_says_running_out_of_memory_in_one_line(tmp_path, monkeypatch):
    """Past the estimate (another process took the memory meanwhile), a MemoryError was a
    traceback and exit code 1."""
    from gpexplain.cli import stages

    def fit(*args):
        raise MemoryError("Unable to allocate 2.25 GiB for an array with shape (17379, 17379)")

    monkeypatch.setattr(stages, "fit", fit)
    X, y = _data()
    path = tmp_path / "d.csv"
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "y": y}).to_csv(path, index=False)
    result = CliRunner().invoke(
        app, ["explain", str(path), "--target", "y", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2, result.output + repr(result.exception)
    [line] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert "out of memory at 'Fitting exact GP" in line and "(17379, 17379)" in line, line
    assert "--model sparse" in line and "Traceback" not in result.output
