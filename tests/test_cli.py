"""End-to-end tests of the ``gpexplain`` command line (explain, demo, datasets)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from gpexplain.cli import app
from gpexplain.cli.reading import format_rows, parse_baseline, parse_rows
from gpexplain.datasets import load_dataset
from gpexplain.models.families import FAMILIES

REPO_ROOT = Path(__file__).resolve().parents[1]
BUNDLED_WINE = REPO_ROOT / "src" / "gpexplain" / "datasets" / "data" / "winequality-red.csv"
TAIPEI_TARGET = "Y house price of unit area"
OUTPUT_FILES = ("attributions.csv", "summary.json", "attributions.png", "importance.png")
CSV_COLUMNS = ["row", "point", "feature", "value", "attribution", "std", "lower", "upper"]
SUMMARY_KEYS = {
    "data_file",
    "shape",
    "target",
    "feature_names",
    "model",
    "kernel",
    "seed",
    "device",
    "hyperparameters",
    "constant_features",
    "log_marginal_likelihood",
    "holdout",
    "rows",
    "explained_rows",
    "method",
    "method_id",
    "references",
    "interval_level",
    "baseline",
    "completeness_gap",
    "timings_seconds",
    "gpexplain_version",
    "missing",
    "categorical_columns",
    "predictions",
    "global_importance",
}

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def assert_ok(result):
    assert result.exit_code == 0, result.output + repr(result.exception)


def small_frame(n_rows: int = 40, seed: int = 0) -> pd.DataFrame:
    """Synthetic regression table: y depends on a and b, not on c."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "a": rng.uniform(-2, 2, n_rows),
            "b": rng.uniform(0, 10, n_rows),
            "c": rng.normal(size=n_rows),
        }
    )
    frame["y"] = np.sin(frame["a"]) + 0.3 * frame["b"] + 0.05 * rng.normal(size=n_rows)
    return frame


@pytest.fixture(scope="module")
def taipei_run(tmp_path_factory):
    """One explain run on the bundled Taipei real-estate data (414 rows), rows 0:5."""
    folder = tmp_path_factory.mktemp("taipei")
    X, y = load_dataset("taipei-real-estate")
    data = folder / "taipei.csv"
    pd.concat([X, y], axis=1).to_csv(data, index=False)
    out = folder / "out"
    result = invoke("explain", data, "--target", TAIPEI_TARGET, "--rows", "0:5", "--out", out)
    return result, out, X, y


@pytest.fixture
def single_start(monkeypatch):
    """Fit from one starting point (no random restarts) where fit quality is not the subject.

    The command line itself is unchanged; only the optimiser does a quarter of the work.
    """
    one_start(monkeypatch)


def one_start(monkeypatch):
    """Fit the exact GP family from one starting point (no random restarts) for this test."""
    exact = FAMILIES.get("exact")
    parameters = exact.parameters
    monkeypatch.setattr(exact, "parameters", lambda settings: {**parameters(settings),
                                                               "n_restarts": 0})


@pytest.fixture
def small_csv(tmp_path) -> Path:
    path = tmp_path / "small.csv"
    small_frame().to_csv(path, index=False)
    return path


# -- the main run ------------------------------------------------------------------------
def test_explain_taipei_writes_all_files(taipei_run):
    result, out, _, _ = taipei_run
    assert_ok(result)
    for name in OUTPUT_FILES:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert "Traceback" not in result.output
    assert str(out) in result.stdout.replace("\n", "")


def test_explain_taipei_attribution_table(taipei_run):
    result, out, X, _ = taipei_run
    assert_ok(result)
    table = pd.read_csv(out / "attributions.csv")
    assert list(table.columns) == CSV_COLUMNS
    assert len(table) == 5 * X.shape[1]
    assert table["row"].tolist() == np.repeat(np.arange(5), X.shape[1]).tolist()
    assert table["feature"].tolist() == list(X.columns) * 5
    np.testing.assert_allclose(table["value"], X.iloc[:5].to_numpy().ravel())
    assert np.all(table["std"] >= 0)
    np.testing.assert_allclose(
        table["upper"] - table["attribution"], 1.959964 * table["std"], rtol=1e-5, atol=1e-12
    )
    assert np.all(table["lower"] <= table["attribution"])


def test_explain_taipei_global_importance_in_summary(taipei_run):
    """summary.json's exact importance: by Jensen, E[mean_p |a_pi|] >= mean_p |E a_pi| (the
    plug-in from attributions.csv), with a positive posterior std and pairwise probabilities
    that are complementary up to their stated Monte Carlo error."""
    result, out, X, y = taipei_run
    importance = json.loads((out / "summary.json").read_text())["global_importance"]
    table = pd.read_csv(out / "attributions.csv")
    plug_in = table.assign(size=table["attribution"].abs()).groupby("feature")["size"].mean()
    for name in X.columns:
        assert importance["mean"][name] >= plug_in[name] - 1e-12
        assert importance["std"][name] > 0
    error = importance["probability_standard_error"]
    assert 0 < error <= 0.5 / np.sqrt(importance["n_samples"])
    probability = importance["probability_greater"]
    for a in X.columns:
        for b in X.columns:
            if a != b:
                assert 0 <= probability[a][b] <= 1
                assert abs(probability[a][b] + probability[b][a] - 1) < 1e-12  # no ties
    assert importance["n_points"] == 5 and importance["note"] == ""


def test_importance_summary_writes_json_values_or_why_not():
    from gpexplain.cli.output import importance_summary
    from gpexplain.global_attribution import GlobalImportance

    importance = GlobalImportance(
        mean=np.array([1.0, 2.0]), std=np.array([0.1, 0.2]), cov=None,
        probability_greater=None,
        probability_standard_error=0.0, summary="mean_abs", n_points=3, n_samples=0,
        feature_names=["a", "b"], method="m", note="bounded")
    written = importance_summary(importance)
    assert written["probability_greater"] is None
    assert written["std"] == {"a": 0.1, "b": 0.2} and written["note"] == "bounded"
    assert json.loads(json.dumps(written)) == written
    assert importance_summary(None, "too many rows") == {"skipped": "too many rows"}


def test_explain_taipei_summary(taipei_run):
    result, out, X, y = taipei_run
    assert_ok(result)
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == SUMMARY_KEYS
    assert summary["shape"] == {"rows": 414, "columns": 7, "features": 6}
    assert summary["target"] == TAIPEI_TARGET
    assert summary["feature_names"] == list(X.columns)
    assert summary["kernel"] == "ard"
    hyper = summary["hyperparameters"]
    assert set(hyper["lengthscales"]) == set(X.columns)
    assert all(v is not None and v > 0 for v in hyper["lengthscales"].values())
    assert hyper["variance"] > 0 and hyper["noise"] > 0
    assert y.min() < hyper["mean"] < y.max()
    assert summary["constant_features"] == []
    assert np.isfinite(summary["log_marginal_likelihood"])
    holdout = summary["holdout"]
    assert holdout["n_train"] == 331 and holdout["n_test"] == 83
    assert 0.0 < holdout["r2"] <= 1.0  # ML-II overfits Taipei's coordinates: about 0.27
    assert summary["explained_rows"] == [0, 1, 2, 3, 4]
    baseline = summary["baseline"]
    assert baseline["spec"] == "mean"
    np.testing.assert_allclose(list(baseline["vector"].values()), X.mean().to_numpy())
    assert set(summary["timings_seconds"]) == {"fit", "explain", "holdout"}
    assert all(t >= 0 for t in summary["timings_seconds"].values())
    # Completeness ties the table to the summary: attributions sum to prediction - baseline.
    table = pd.read_csv(out / "attributions.csv")
    assert np.isfinite(table.groupby("row")["attribution"].sum()).all()


def test_explain_taipei_completeness(taipei_run):
    """Completeness gaps, relative to the target's scale (std of y) and variance."""
    result, out, _, y = taipei_run
    assert_ok(result)
    gaps = json.loads((out / "summary.json").read_text())["completeness_gap"]
    assert gaps["mean"] / y.std() < 1e-8
    assert gaps["variance"] / y.var() < 1e-8


def test_explain_taipei_prints_top_features(taipei_run):
    result, _, _, _ = taipei_run
    assert "Row 0: prediction" in result.stdout
    assert "X3 distance to the" in result.stdout


# -- other inputs --------------------------------------------------------------------------
def test_datasets_command_lists_the_three_sets():
    result = invoke("datasets")
    assert_ok(result)
    for name in ("diabetes", "wine-quality-red", "taipei-real-estate"):
        assert name in result.stdout


def test_version():
    result = invoke("--version")
    assert_ok(result)
    assert result.stdout.startswith("gpexplain ")


def test_explain_wine_detects_semicolons(tmp_path, single_start):
    lines = BUNDLED_WINE.read_text().splitlines(keepends=True)[:301]
    assert ";" in lines[0]
    data = tmp_path / "wine300.csv"
    data.write_text("".join(lines))
    out = tmp_path / "out"
    result = invoke(
        "explain",
        data,
        "--target",
        "quality",
        "--rows",
        "0,7",
        "--kernel",
        "isotropic",
        "--no-holdout",
        "--out",
        out,
    )
    assert_ok(result)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["shape"] == {"rows": 300, "columns": 12, "features": 11}
    assert summary["feature_names"][0] == "fixed acidity"
    assert summary["holdout"]["r2"] is None
    table = pd.read_csv(out / "attributions.csv")
    assert sorted(set(table["row"])) == [0, 7]


def test_constant_column_gets_exactly_zero_attribution(tmp_path, single_start):
    frame = small_frame()
    frame.insert(1, "const", 3.5)
    data = tmp_path / "constant.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "out"
    result = invoke("explain", data, "--target", "y", "--rows", "0:4", "--no-holdout", "--out", out)
    assert_ok(result)
    warning_lines = [line for line in result.stderr.splitlines() if line.startswith("Warning:")]
    assert any("'const'" in line for line in warning_lines), result.stderr
    table = pd.read_csv(out / "attributions.csv")
    constant = table[table["feature"] == "const"]
    assert len(constant) == 4
    assert (constant["attribution"] == 0.0).all() and (constant["std"] == 0.0).all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["constant_features"] == ["const"]
    assert summary["hyperparameters"]["lengthscales"]["const"] is None
    assert summary["hyperparameters"]["lengthscales"]["a"] > 0


def test_parquet_input_and_row_baseline(tmp_path, single_start):
    data = tmp_path / "small.parquet"
    small_frame().to_parquet(data)
    out = tmp_path / "out"
    result = invoke(
        "explain",
        data,
        "--target",
        "y",
        "--rows",
        "2:5",
        "--baseline",
        "7",
        "--kernel",
        "isotropic",
        "--seed",
        3,
        "--out",
        out,
    )
    assert_ok(result)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kernel"] == "isotropic" and summary["seed"] == 3
    assert summary["baseline"]["spec"] == "row 7"
    expected = small_frame().drop(columns="y").iloc[7].to_numpy()
    np.testing.assert_allclose(list(summary["baseline"]["vector"].values()), expected)
    assert summary["explained_rows"] == [2, 3, 4]
    assert summary["holdout"]["n_test"] == 8
    assert summary["holdout"]["r2"] is not None


def test_console_table_counts_the_features_it_leaves_out():
    """The demo's 10 features: the table shows 8 and says where the other 2 are."""
    from io import StringIO
    from types import SimpleNamespace

    from rich.console import Console

    from gpexplain.cli.output import TOP_FEATURES, top_features_table

    def shown(n_features):
        mean = np.arange(1.0, n_features + 1)[None, :]
        attr = SimpleNamespace(
            mean=mean, X=np.zeros((1, n_features)), prediction=np.array([1.0]),
            baseline_prediction=0.0, feature_names=[f"f{i}" for i in range(n_features)],
            interval=lambda level: (mean - 1, mean + 1),
        )
        console = Console(file=StringIO(), width=200)
        console.print(top_features_table(attr, 0))
        return console.file.getvalue()

    assert "(2 more features in attributions.csv)" in shown(TOP_FEATURES + 2)
    assert "(1 more feature in attributions.csv)" in shown(TOP_FEATURES + 1)
    assert "more feature" not in shown(TOP_FEATURES)


def test_help_keeps_the_dask_extra_in_brackets():
    """Typer renders help as Rich markup, which took ``[dask]`` for a style tag."""
    result = runner.invoke(app, ["explain", "--help"], terminal_width=200)
    assert_ok(result)
    assert "gpexplain[dask]" in result.output


def test_demo_rejects_unknown_dataset(tmp_path):
    result = invoke("demo", "--dataset", "iris", "--out", tmp_path / "demo")
    assert result.exit_code == 2
    assert "diabetes" in result.stderr and "Traceback" not in result.output


@pytest.mark.slow
def test_demo_on_diabetes(tmp_path):
    out = tmp_path / "demo"
    result = invoke("demo", "--out", out)
    assert_ok(result)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["data_file"] == "bundled:diabetes"
    assert summary["explained_rows"] == list(range(20))
    assert len(pd.read_csv(out / "attributions.csv")) == 20 * 10
    for name in OUTPUT_FILES:
        assert (out / name).is_file()


# -- progress where stderr is not a terminal ----------------------------------------------
def test_progress_lines_when_stderr_is_not_a_terminal(tmp_path, small_csv, single_start):
    """CliRunner's stderr is no terminal: each stage is announced as it starts and ends, not
    only once the run is over (a job killed mid-run used to leave an empty log)."""
    result = invoke("explain", small_csv, "--target", "y", "--rows", "0:2", "--out",
                    tmp_path / "out")
    assert_ok(result)
    lines = result.stderr.splitlines()
    for stage in ("Fitting exact GP", "Explaining 2 row(s)", "Held-out R^2"):
        started = [i for i, line in enumerate(lines) if line.startswith(stage)
                   and line.endswith(" ...")]
        ended = [i for i, line in enumerate(lines) if line.startswith(stage)
                 and ": done (" in line]
        assert len(started) == 1 and len(ended) == 1 and started[0] < ended[0], lines
    assert not any("\x1b" in line or "\u2501" in line for line in lines)  # no bar drawn


def test_plain_progress_lines_are_spaced_and_end_once():
    from io import StringIO

    from rich.console import Console

    from gpexplain.cli.common import PlainProgress

    stream = StringIO()
    progress = PlainProgress(Console(file=stream, width=200), every=0.0)
    task = progress.add_task("Fitting", total=None)
    progress.update(task, completed=5, total=20)
    progress.update(task, completed=20, total=20)
    progress.update(task, completed=20, total=20)
    lines = stream.getvalue().splitlines()
    assert lines[:2] == ["Fitting ...", "Fitting: 25% (0 s)"]
    assert lines[2:] == ["Fitting: done (0 s)"]
    quiet = PlainProgress(Console(file=StringIO()), every=3600.0)
    task = quiet.add_task("Fitting")
    quiet.update(task, completed=5, total=20)
    assert quiet.console.file.getvalue() == "Fitting ...\n"


# -- bad input -----------------------------------------------------------------------------
def _write(tmp_path, name, frame):
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


def _bad_cases(tmp_path, small_csv):
    """(arguments, expected message fragments) for every kind of bad input."""
    frame = small_frame()
    identifier = frame.assign(name=[f"house {i}" for i in range(40)])
    stray = frame.astype({"b": object})
    stray.loc[5, "b"] = "?"
    with_nan = frame.copy()
    with_nan.loc[3, "b"] = np.nan
    with_inf = frame.copy()
    with_inf.loc[6, "c"] = np.inf
    nan_target = frame.copy()
    nan_target.loc[2, "y"] = np.nan
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"PK\x03\x04\x00\x00\x00binary")
    ok = ["--target", "y"]
    return {
        "missing target": ([small_csv, "--target", "price"], ["'price' not found", "'a'", "'y'"]),
        "identifier column": (
            [_write(tmp_path, "text.csv", identifier), *ok], ["'name'", "identifier", "drop it"]
        ),
        "stray marker": (
            [_write(tmp_path, "stray.csv", stray), *ok], ["'b'", "row 5", "--missing drop"]
        ),
        "NaN": ([_write(tmp_path, "nan.csv", with_nan), *ok], ["missing", "row 3", "'b'"]),
        "inf": ([_write(tmp_path, "inf.csv", with_inf), *ok], ["inf", "row 6", "'c'"]),
        "NaN target": ([_write(tmp_path, "nant.csv", nan_target), *ok], ["'y'", "row 2"]),
        "one row": ([_write(tmp_path, "one.csv", frame.iloc[:1]), *ok], ["1 row", "at least 2"]),
        "header only": ([_write(tmp_path, "none.csv", frame.iloc[:0]), *ok], ["0 row"]),
        "only target": ([_write(tmp_path, "only.csv", frame[["y"]]), *ok], ["no feature"]),
        "rows spec": ([small_csv, *ok, "--rows", "first"], ["unknown --rows", "'first'"]),
        "rows three parts": ([small_csv, *ok, "--rows", "1:2:3"], ["unknown --rows"]),
        "rows out of range": ([small_csv, *ok, "--rows", "3,40"], ["40", "out of range"]),
        "empty range": ([small_csv, *ok, "--rows", "50:60"], ["selects no rows", "40 rows"]),
        "negative row": ([small_csv, *ok, "--rows", "-1:3"], ["--rows"]),
        "baseline spec": ([small_csv, *ok, "--baseline", "average"], ["unknown --baseline"]),
        "baseline row": ([small_csv, *ok, "--baseline", "40"], ["row 40", "out of range"]),
        "kernel": ([small_csv, *ok, "--kernel", "matern"], ["unknown --kernel", "'matern'"]),
        "seed": ([small_csv, *ok, "--seed", "-1"], ["--seed"]),
        "missing file": ([tmp_path / "nope.csv", *ok], ["nope.csv", "no such file"]),
        "empty file": ([empty, *ok], ["empty.csv", "empty"]),
        "binary file": ([binary, *ok], ["binary.csv", "binary"]),
        "directory": ([tmp_path, *ok], ["not a regular file"]),
        "device name": ([small_csv, *ok, "--device", "gpu0"],
                        ["--device", "'gpu0' is not a torch device"]),
        "device model": ([small_csv, *ok, "--model", "sparse", "--device", "cpu"],
                         ["--device applies to --model exact", "not to --model sparse"]),
        "device classifier": ([_write(tmp_path, "class.csv", frame.assign(
            y=np.where(frame["y"] > frame["y"].median(), "hi", "lo"))), *ok, "--device", "cpu"],
                              ["--device applies to the exact GP", "class target"]),
    }


CASES = [
    "missing target",
    "identifier column",
    "stray marker",
    "NaN",
    "inf",
    "NaN target",
    "one row",
    "header only",
    "only target",
    "rows spec",
    "rows three parts",
    "rows out of range",
    "empty range",
    "negative row",
    "baseline spec",
    "baseline row",
    "kernel",
    "seed",
    "missing file",
    "empty file",
    "binary file",
    "directory",
    "device name",
    "device model",
    "device classifier",
]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_exits_2_with_one_line(case, tmp_path, small_csv):
    arguments, fragments = _bad_cases(tmp_path, small_csv)[case]
    out = tmp_path / "out"
    result = invoke("explain", *arguments, "--out", out)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    message = result.stderr.strip()
    assert message.startswith("Error: ") and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert not (out / "summary.json").exists()


def test_bad_case_list_is_complete(tmp_path, small_csv):
    assert sorted(CASES) == sorted(_bad_cases(tmp_path, small_csv))


# -- parsing helpers -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("0:3", [0, 1, 2]),
        (" 2:4 ", [2, 3]),
        (":2", [0, 1]),
        ("8:", [8, 9]),
        ("5:100", [5, 6, 7, 8, 9]),
        ("3,7,9", [3, 7, 9]),
        ("9, 3,9", [9, 3]),
        ("4", [4]),
        ("ALL", list(range(10))),
    ],
)
def test_parse_rows(spec, expected):
    assert parse_rows(spec, 10) == expected


@pytest.mark.parametrize(("rows", "spec"), [([4, 5, 6], "4:7"), ([3, 5], "3,5"),
                                            ([9, 3, 4, 5], "9,3,4,5"), ([2], "2")])
def test_format_rows_is_what_parse_rows_reads(rows, spec):
    """The --rows words of a lost block of rows (issue 27 item 20) read back as those rows."""
    assert format_rows(rows) == spec
    assert parse_rows(spec, 10) == rows


@pytest.mark.parametrize("spec", ["", "x", "1-3", "1:2:3", "3,10", "10:12", "4:4", "-2", "1.5"])
def test_parse_rows_rejects(spec):
    with pytest.raises(ValueError, match="--rows"):
        parse_rows(spec, 10)


def test_parse_baseline():
    X = small_frame().drop(columns="y")
    assert parse_baseline("Median", X) == ("median", "median")
    vector, label = parse_baseline("12", X)
    assert label == "row 12"
    np.testing.assert_array_equal(vector, X.iloc[12].to_numpy())
    for spec in ("40", "-1", "first", "1e3"):
        with pytest.raises(ValueError, match="--baseline"):
            parse_baseline(spec, X)


# -- other models --------------------------------------------------------------------------
def _explain_small(tmp_path, small_csv, *options):
    out = tmp_path / "out"
    result = invoke(
        "explain", small_csv, "--target", "y", "--rows", "0:3", "--no-holdout", "--out", out,
        *options,
    )
    assert_ok(result)
    return out, json.loads((out / "summary.json").read_text())


def test_sparse_model_closed_form_ig(tmp_path, small_csv):
    out, summary = _explain_small(tmp_path, small_csv, "--model", "sparse", "--n-inducing", "8")
    assert summary["model"] == "sparse" and summary["kernel"] == "ard"
    assert "closed form" in summary["method"]
    assert summary["completeness_gap"]["mean"] < 1e-8
    assert summary["completeness_gap"]["variance"] < 1e-8
    assert set(summary["hyperparameters"]["lengthscales"]) == {"a", "b", "c"}


def test_matern_kernel_is_explained_by_quadrature(tmp_path, small_csv, single_start):
    out, summary = _explain_small(tmp_path, small_csv, "--kernel", "matern52")
    assert summary["kernel"] == "matern52"
    assert summary["hyperparameters"]["kernel"] == "ScaleKernel(MaternKernel(nu=2.5))"
    assert all(v > 0 for v in summary["hyperparameters"]["lengthscales"].values())
    assert "quadrature" in summary["method"]
    assert summary["completeness_gap"]["mean"] < 1e-8
    # the exact importance across the 3 rows, by quadrature across points (issue 25)
    importance = summary["global_importance"]
    assert "skipped" not in importance and set(importance["std"]) == {"a", "b", "c"}
    assert all(v > 0 for v in importance["std"].values())


def test_device_runs_the_exact_gp_in_torch_with_the_same_attributions(tmp_path, small_csv):
    """--device cpu runs the GPU path's torch code on the CPU: the same attributions as the
    NumPy path to rounding (issue 26 item 5)."""
    import pandas as pd

    out_numpy, _ = _explain_small(tmp_path / "numpy", small_csv)
    out_torch, summary = _explain_small(tmp_path / "torch", small_csv, "--device", "cpu")
    assert summary["device"] == "cpu"
    numpy_table = pd.read_csv(out_numpy / "attributions.csv")
    torch_table = pd.read_csv(out_torch / "attributions.csv")
    columns = [c for c in numpy_table.columns if numpy_table[c].dtype.kind == "f"]
    np.testing.assert_allclose(torch_table[columns], numpy_table[columns], rtol=1e-9,
                               atol=1e-12)


def test_exact_importance_is_skipped_above_its_time_bound(tmp_path, small_csv, monkeypatch):
    from gpexplain.cli import methods

    monkeypatch.setattr(methods, "MAX_IMPORTANCE_SECONDS", 1e-9)
    _, summary = _explain_small(tmp_path, small_csv)
    assert "would take about 0 s" in summary["global_importance"]["skipped"]


def test_additive_model_writes_global_shapley(tmp_path, small_csv):
    out, summary = _explain_small(tmp_path, small_csv, "--model", "additive")
    assert "Shapley" in summary["method"] or "shapley" in summary["method"]
    assert (out / "global_shapley.png").stat().st_size > 0
    shapley = summary["global_shapley"]
    assert set(shapley["values"]) == {"a", "b", "c"}
    total = sum(shapley["values"].values())
    assert abs(total - shapley["total_variance"]) < 1e-8 * max(1.0, shapley["total_variance"])
    assert summary["baseline"]["spec"] == "base value"
    assert summary["completeness_gap"]["mean"] < 1e-8
    # b drives y linearly over a wide range; c is noise.
    assert shapley["values"]["b"] > shapley["values"]["c"]


def test_additive_model_with_integrated_gradients(tmp_path, small_csv):
    out, summary = _explain_small(tmp_path, small_csv, "--model", "additive", "--method", "ig")
    assert "integrated gradients" in summary["method"]
    assert summary["method_id"] == "integrated-gradients"
    assert summary["baseline"]["spec"] == "mean"
    assert summary["completeness_gap"]["mean"] < 1e-8


def test_gpx_model_writes_weights(tmp_path, small_csv):
    out, summary = _explain_small(tmp_path, small_csv, "--model", "gpx")
    assert summary["method"] == "GPX contributions"
    assert summary["method_id"] == "gpx-contributions"
    assert any("Gaussian process regression with local explanation" in reference
               for reference in summary["references"])
    assert summary["hyperparameters"]["weight_noise"] > 0
    weights = pd.read_csv(out / "weights.csv")
    assert list(weights.columns) == [c if c != "attribution" else "weight" for c in CSV_COLUMNS]
    contributions = pd.read_csv(out / "attributions.csv")
    # A contribution is the weight times the feature value.
    np.testing.assert_allclose(
        contributions["attribution"], weights["weight"] * weights["value"], rtol=1e-10, atol=1e-12
    )
    assert summary["completeness_gap"]["mean"] < 1e-8


@pytest.mark.parametrize(
    ("options", "fragments"),
    [
        (["--model", "forest"], ["unknown --model", "'forest'"]),
        (["--method", "lime"], ["unknown --method", "'lime'"]),
        (["--model", "sparse", "--method", "shapley"], ["does not apply to --model sparse"]),
        (["--model", "gpx", "--method", "ig"], ["does not apply to --model gpx"]),
        (["--model", "gpx", "--kernel", "matern32"], ["whose kernel is its own"]),
        (["--model", "sparse", "--kernel", "rq"], ["supports --kernel ard, isotropic"]),
        (["--n-inducing", "5"], ["--n-inducing applies to --model sparse and to the classifier"]),
        (["--model", "sparse", "--n-inducing", "0"], ["--n-inducing must be a positive"]),
        (["--model", "additive", "--baseline", "median"], ["--baseline applies to integrated"]),
        (["--workers", "2", "--dask-scheduler", "tcp://127.0.0.1:1"], ["not both"]),
        (["--workers", "0"], ["--workers must be a positive integer"]),
    ],
)
def test_bad_model_options_exit_2(options, fragments, tmp_path, small_csv):
    result = invoke("explain", small_csv, "--target", "y", "--out", tmp_path / "o", *options)
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert message.startswith("Error: ") and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_random_feature_model_closed_form_ig(tmp_path, small_csv):
    out, summary = _explain_small(tmp_path, small_csv, "--model", "random-features")
    assert summary["model"] == "random-features"
    assert "random Fourier" in summary["kernel"]
    assert "closed form" in summary["method"]
    assert summary["completeness_gap"]["mean"] < 1e-8
    assert summary["completeness_gap"]["variance"] < 1e-8


# -- the output folder: written whole or not at all ----------------------------------------
def _previous_output(folder: Path) -> Path:
    """A folder as an earlier gpexplain run (other options) left it."""
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps({"gpexplain_version": "0.0", "run": 1}))
    (folder / "weights.csv").write_text("from the earlier run\n")
    return folder


@pytest.mark.parametrize("command", ["explain", "sensitivity", "poe", "demo"])
def test_a_folder_of_other_files_is_refused_as_out(command, tmp_path, small_csv):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("the user's own file")
    data = [] if command == "demo" else [small_csv, "--target", "y"]
    result = invoke(command, *data, "--out", out)
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert "\n" not in message and str(out) in message and "--force" in message, message
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_out_containing_the_data_file_is_refused(tmp_path):
    out = _previous_output(tmp_path / "out")
    data = out / "small.csv"
    small_frame().to_csv(data, index=False)
    result = invoke("explain", data, "--target", "y", "--out", out, "--force")
    assert result.exit_code == 2 and "small.csv" in result.stderr, result.output
    assert data.is_file()


def test_a_rerun_replaces_a_previous_output_whole(tmp_path, small_csv, single_start):
    out = _previous_output(tmp_path / "out")
    assert_ok(invoke("explain", small_csv, "--target", "y", "--rows", "0:2", "--no-holdout",
                     "--out", out))
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT_FILES)  # no weights.csv
    assert json.loads((out / "summary.json").read_text())["explained_rows"] == [0, 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "small.csv"]  # nothing staged


def test_force_replaces_a_folder_of_other_files(tmp_path, small_csv, single_start):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("to be replaced")
    assert_ok(invoke("explain", small_csv, "--target", "y", "--rows", "0:2", "--no-holdout",
                     "--out", out, "--force"))
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT_FILES)


def test_a_run_failing_while_writing_leaves_the_previous_output(tmp_path, small_csv,
                                                                single_start, monkeypatch):
    from gpexplain.cli import regression

    out = _previous_output(tmp_path / "out")
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def broken(*args, **kwargs):
        raise RuntimeError("the figure could not be drawn")

    monkeypatch.setattr(regression, "save_attribution_figures", broken)
    result = invoke("explain", small_csv, "--target", "y", "--rows", "0:2", "--no-holdout",
                    "--out", out)
    assert isinstance(result.exception, RuntimeError)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "small.csv"]


def test_names_and_labels_from_anyone_are_printed_and_written_as_text(tmp_path, single_start):
    """Rich markup in a column name, a ``$`` for matplotlib and spreadsheet formulas in names
    and category values: printed as they are, and neutralised in the CSV (OWASP)."""
    frame = small_frame(n_rows=30).rename(columns={"a": "=HYPERLINK(1)", "b": "[/]odd $^$"})
    frame["kind"] = np.where(np.arange(30) % 2, "@SUM(1)", "-x")
    data = _write(tmp_path, "names.csv", frame)
    out = tmp_path / "out"
    result = invoke("explain", data, "--target", "y", "--rows", "0:2", "--no-holdout",
                    "--out", out)
    assert_ok(result)
    assert "[/]odd $^$" in result.stdout
    table = pd.read_csv(out / "attributions.csv")
    assert set(table["feature"]) == {"'=HYPERLINK(1)", "[/]odd $^$", "c", "kind"}
    kinds = table.loc[table["feature"] == "kind", "value"]
    assert set(kinds) <= {"'@SUM(1)", "'-x"}
    numbers = pd.to_numeric(table.loc[table["feature"] == "c", "value"])  # numbers stay numbers
    assert (numbers < 0).any() and table["attribution"].dtype == np.float64
