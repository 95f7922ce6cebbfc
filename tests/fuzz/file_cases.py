"""Fuzz cases over files as users have them (issue 27 items 20 and 22, and the read-stage
fixes before them: decimal commas, trailing delimiters, a target beyond 1e154).

The command-line cases run ``gpexplain sensitivity`` and ``gpexplain poe`` in process (Typer's
``CliRunner``) on small tables with one hostile column: every run must succeed or exit 2 with
one line naming the column. The reading case writes numbers in a file's dialect and checks
that ``read_table`` gives them back.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpexplain.cli import app
from tests.fuzz.harness import Outcome, classify_exit, guarded
from tests.fuzz.strategies import log_uniform

COMMANDS = {"sensitivity": [], "poe": ["--rows", "0:3"]}
HOSTILE = ("huge_column", "huge_target", "all_missing_text", "huge_units")


def _table(rng, n: int) -> pd.DataFrame:
    frame = pd.DataFrame({"a": rng.normal(size=n), "b": rng.uniform(-2, 2, size=n)})
    frame["y"] = np.sin(frame["a"]) + 0.5 * frame["b"] + 0.05 * rng.normal(size=n)
    return frame


def _run(command: str, frame: pd.DataFrame, folder: Path, name: str, *options):
    data = folder / f"{name}.parquet"
    frame.to_parquet(data)
    return CliRunner().invoke(
        app, [command, str(data), "--target", "y", "--out", str(folder / f"out-{name}"),
         *COMMANDS[command], *options],
    )


def _numbers(folder: Path, command: str) -> np.ndarray:
    """The command's main numbers: Sobol total indices, or POE weights."""
    if command == "sensitivity":
        return pd.read_csv(folder / "sensitivity.csv")["total_index"].to_numpy()
    table = pd.read_csv(folder / "attributions.csv")
    return table.sort_values(["row", "feature"])["weight"].to_numpy()


@guarded
def cli_hostile_column_case(data) -> Outcome:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    command = data.draw(st.sampled_from(sorted(COMMANDS)))
    kind = data.draw(st.sampled_from(HOSTILE))
    frame = _table(rng, data.draw(st.integers(8, 14)))
    options, names = [], ("'b'",)
    if kind == "huge_column":  # the spread of b overflows float64's square
        frame["b"] *= data.draw(log_uniform(1e155, 1e300))
    elif kind == "huge_target":
        frame["y"] *= data.draw(log_uniform(1e155, 1e300))
        names = ("'y'",)
    elif kind == "all_missing_text":
        frame["b"] = pd.Series([None] * len(frame), dtype=object)
        options = ["--missing", data.draw(st.sampled_from(["error", "drop"]))]
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        factor = data.draw(log_uniform(1e20, 1e150)) if kind == "huge_units" else 1.0
        result = _run(command, frame.assign(b=frame["b"] * factor) if factor != 1 else frame,
                      folder, "hostile", *options)
        outcome = classify_exit(result, names)
        outcome.detail = f"{command}, {kind}: {outcome.detail}"
        if outcome.kind != "ok" or result.exit_code == 2:
            return outcome
        if kind != "huge_units":
            return Outcome("silently_wrong", f"{command}, {kind}: accepted (exit 0)")
        got = _numbers(folder / "out-hostile", command)
        if command == "poe":  # weights are per unit of b: rescale them back
            labels = pd.read_csv(folder / "out-hostile" / "attributions.csv").sort_values(
                ["row", "feature"])["feature"].to_numpy()
            got = np.where(labels == "b", got * factor, got)
        reference = _run(command, frame, folder, "plain")
        if reference.exit_code != 0:
            return Outcome("unclear_error", f"{command}: plain units failed: {reference.output}")
        want = _numbers(folder / "out-plain", command)
        if not np.all(np.isfinite(got)) or np.max(np.abs(got - want)) > 1e-4 * max(
                np.max(np.abs(want)), 1e-12):
            return Outcome("silently_wrong", f"{command}: b in units of {factor:.3g} gives "
                                             f"{got} instead of {want}")
    return Outcome("ok")


@guarded
def read_table_case(data) -> Outcome:
    """R's write.csv2 (``;`` and decimal commas) and lines ending with the delimiter are read
    back as the numbers written."""
    from gpexplain.datasets import read_table

    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    dialect = data.draw(st.sampled_from(["decimal_comma", "trailing_delimiter"]))
    # one column of "9,5" is ambiguous (a comma may separate two columns): two or more
    n, d = data.draw(st.integers(2, 8)), data.draw(st.integers(1 + (dialect == "decimal_comma"),
                                                               4))
    values = np.round(rng.normal(size=(n, d)) * data.draw(log_uniform(1e-2, 1e4)), 3)
    names = [f"c{j}" for j in range(d)]
    if dialect == "decimal_comma":
        cells = [[f"{v:.3f}".replace(".", ",") for v in row] for row in values]
        lines = [";".join(names)] + [";".join(row) for row in cells]
    else:
        separator = data.draw(st.sampled_from([",", ";", "\t"]))
        lines = [separator.join(names) + separator] + [
            separator.join(f"{v:.3f}" for v in row) + separator for row in values]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "table.csv"
        path.write_text("\n".join(lines) + "\n")
        try:
            frame = read_table(path)
        except (ValueError, TypeError) as error:
            return Outcome("unclear_error", f"{dialect}: refused {lines[:2]}: {error}")
    if list(frame.columns) != names or frame.shape != values.shape:
        return Outcome("silently_wrong", f"{dialect}: read columns {list(frame.columns)} "
                                         f"of shape {frame.shape} from {lines[:2]}")
    if not np.allclose(frame.to_numpy(dtype=float), values, rtol=1e-12, atol=0):
        return Outcome("silently_wrong", f"{dialect}: values differ after reading {lines[:2]}")
    return Outcome("ok")


FILE_CASES = (cli_hostile_column_case, read_table_case)
