"""``explain``, ``sensitivity`` and ``poe`` read files through the same stage: the same file
options (``--drop``, ``--missing``, ``--names``, ``--header/--no-header``) and text columns
one-hot encoded. Before the CLI became a package, ``sensitivity`` and ``poe`` refused all of
these."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.test_cli import assert_ok, invoke, one_start, small_frame

COMMANDS = {  # each command's options beyond the file options, kept small for speed
    "explain": ["--rows", "0:4", "--no-holdout"],
    "sensitivity": [],
    "poe": ["--rows", "0:4"],
}


@pytest.fixture(autouse=True)
def single_start(monkeypatch):
    one_start(monkeypatch)


def _messy_frame() -> pd.DataFrame:
    """``small_frame`` with a text column, a column to drop and a missing cell in row 5."""
    frame = small_frame()
    frame.insert(2, "kind", np.where(np.arange(len(frame)) % 2 == 0, "red", "blue"))
    frame.loc[5, "a"] = np.nan
    return frame


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_takes_drop_missing_and_text_columns(tmp_path, command):
    data = tmp_path / "messy.csv"
    _messy_frame().to_csv(data, index=False)
    out = tmp_path / "out"
    result = invoke(command, data, "--target", "y", "--drop", "c", "--missing", "drop",
                    "--out", out, *COMMANDS[command])
    assert_ok(result)
    summary = json.loads((out / "summary.json").read_text())
    assert "c" not in summary["feature_names"]
    assert "kind" not in summary["feature_names"]  # one-hot encoded: one column per category
    assert any(name.startswith("kind") for name in summary["feature_names"])


def test_sensitivity_with_file_options_writes_one_index_per_encoded_column(tmp_path):
    data = tmp_path / "messy.csv"
    _messy_frame().to_csv(data, index=False)
    out = tmp_path / "out"
    result = invoke("sensitivity", data, "--target", "y", "--drop", "c", "--missing", "drop",
                    "--out", out)
    assert_ok(result)
    table = pd.read_csv(out / "sensitivity.csv")
    summary = json.loads((out / "summary.json").read_text())
    assert list(table["feature"]) == summary["feature_names"]
    assert summary["rows"] == 39  # row 5 dropped
    assert "a" in summary["feature_names"] and "c" not in summary["feature_names"]


def test_poe_groups_text_columns_back_in_its_table(tmp_path):
    data = tmp_path / "messy.csv"
    _messy_frame().to_csv(data, index=False)
    out = tmp_path / "out"
    result = invoke("poe", data, "--target", "y", "--drop", "c", "--missing", "drop",
                    "--rows", "3:7", "--out", out)
    assert_ok(result)
    table = pd.read_csv(out / "attributions.csv")
    assert set(table["feature"]) == {"a", "b", "kind"}
    assert sorted(set(table["row"])) == [3, 4, 6, 7]  # file row numbers; row 5 was dropped


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_takes_headerless_files_with_names(tmp_path, command):
    data = tmp_path / "plain.txt"
    small_frame().to_csv(data, index=False, header=False, sep=" ")
    out = tmp_path / "out"
    result = invoke(command, data, "--no-header", "--names", "a,b,c,y", "--target", "y",
                    "--out", out, *COMMANDS[command])
    assert_ok(result)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["feature_names"] == ["a", "b", "c"]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_refuses_a_missing_cell_by_default(tmp_path, command):
    data = tmp_path / "messy.csv"
    _messy_frame().to_csv(data, index=False)
    result = invoke(command, data, "--target", "y", "--out", tmp_path / "out",
                    *COMMANDS[command])
    assert result.exit_code == 2
    assert "use --missing drop" in result.output


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_takes_decimal(tmp_path, command):
    data = tmp_path / "csv2.txt"  # headerless write.csv2: the comma alone looks like a delimiter
    data.write_text("9,5;1,25\n3,25;2,5\n")
    result = invoke(command, data, "--decimal", ",", "--target", "x9", "--out", tmp_path / "o")
    assert result.exit_code == 2  # fails after reading, before fitting: the columns are listed
    assert "available columns: 'x0', 'x1'" in result.output and "'x2'" not in result.output
    result = invoke(command, data, "--decimal", ";", "--target", "x0", "--out", tmp_path / "o")
    assert result.exit_code == 2 and "--decimal must be one of" in result.output


def _one_error_line(result) -> str:
    assert result.exit_code == 2, result.output + repr(result.exception)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


@pytest.mark.parametrize("missing", ["error", "drop"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_refuses_an_all_missing_text_column_naming_it(tmp_path, command, missing):
    """Issue 27 item 20: an all-missing text column (Parquet, None in every row) was refused
    at its first row under --missing error, and --missing drop dropped every row."""
    frame = small_frame()
    frame.insert(1, "note", pd.Series([None] * len(frame), dtype=object))
    data = tmp_path / "empty_text.parquet"
    frame.to_parquet(data)
    result = invoke(command, data, "--target", "y", "--missing", missing,
                    "--out", tmp_path / "out", *COMMANDS[command])
    line = _one_error_line(result)
    assert "column 'note' has no values" in line and "--drop note" in line
    assert_ok(invoke(command, data, "--target", "y", "--drop", "note",
                     "--out", tmp_path / "out", *COMMANDS[command]))


@pytest.mark.parametrize("command", list(COMMANDS))
def test_missing_drop_that_would_drop_every_row_says_so(tmp_path, command):
    """Every row misses a value somewhere, and the target is text: ``sensitivity`` raised an
    IndexError looking for a label among no rows."""
    frame = small_frame()
    frame["y"] = np.where(np.arange(len(frame)) % 2 == 0, "p", "q")
    frame.loc[::2, "a"] = np.nan
    frame.loc[1::2, "b"] = np.nan
    data = tmp_path / "holes.csv"
    frame.to_csv(data, index=False)
    result = invoke(command, data, "--target", "y", "--missing", "drop",
                    "--out", tmp_path / "out", *COMMANDS[command])
    line = _one_error_line(result)
    assert "--missing drop would drop every row" in line and "'a'" in line


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_refuses_a_column_float64_cannot_square(tmp_path, command):
    """Issue 27 item 22: one line naming the column (the estimators' check, shared by all)."""
    frame = small_frame()
    frame["b"] *= 1e160
    data = tmp_path / "huge.csv"
    frame.to_csv(data, index=False)
    line = _one_error_line(invoke(command, data, "--target", "y", "--out", tmp_path / "out",
                                  *COMMANDS[command]))
    assert "column 'b'" in line and "about 1e154" in line


def test_sensitivity_of_a_column_in_huge_units_equals_that_in_plain_units(tmp_path):
    """Issue 27 item 22: a column with std ~1e100 crashed ``sensitivity`` (the Gaussian
    closed forms overflowed); Sobol indices do not depend on a column's units."""
    frame = small_frame()
    plain, huge = tmp_path / "plain.csv", tmp_path / "huge.csv"
    frame.to_csv(plain, index=False)
    frame.assign(b=frame["b"] * 1e100).to_csv(huge, index=False)
    tables = []
    for data in (plain, huge):
        out = tmp_path / data.stem
        assert_ok(invoke("sensitivity", data, "--target", "y", "--out", out))
        tables.append(pd.read_csv(out / "sensitivity.csv"))
    np.testing.assert_allclose(tables[1]["total_index"], tables[0]["total_index"], atol=1e-6)
