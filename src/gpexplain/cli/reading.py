"""The read and encode stages every command shares: a table in, features and target out.

``read_frame`` reads the file (``--header/--no-header``, ``--names``, ``--decimal``);
``select`` applies ``--target``, ``--drop`` and ``--missing``; ``split_target`` separates and
validates features and target; ``encode`` one-hot encodes text columns (the model sees the
encoded table, the outputs name the file's columns); ``parse_rows`` and ``parse_baseline`` read
``--rows`` and ``--baseline``. Each raises ValueError/TypeError naming the option, row or
column, except ``read_frame``, which exits with code 2 itself (``common.fail``).
"""

from __future__ import annotations

import difflib

import numpy as np
import pandas as pd
from rich.console import Console

from gpexplain._validation import as_feature_matrix, check_spread
from gpexplain.cli.common import fail, say
from gpexplain.datasets import read_table
from gpexplain.encoding import CategoricalEncoder, is_categorical

__all__ = [
    "BASELINES",
    "MISSING_POLICIES",
    "drop_columns",
    "encode",
    "handle_missing",
    "parse_baseline",
    "parse_rows",
    "read_frame",
    "refuse_empty_columns",
    "resolve_target",
    "resolve_targets",
    "row_labels",
    "say_what_was_read",
    "select",
    "split_target",
]

BASELINES = ("mean", "median", "zeros")
MISSING_POLICIES = ("error", "drop")


def _non_negative_int(text: str, what: str) -> int:
    text = text.strip()
    if not text.isdigit():
        raise ValueError(f"{what} {text!r} is not a row position (an integer >= 0)")
    return int(text)


def parse_rows(spec: str, n_rows: int) -> list[int]:
    """Row positions selected by a ``--rows`` specification.

    Parameters
    ----------
    spec : str
        ``"all"``; a half-open range ``"START:STOP"`` of 0-based data-row positions (either end
        may be omitted; ``STOP`` beyond the last row is clipped, as in Python slicing); or a
        comma-separated list ``"3,7,9"`` (duplicates are dropped, order kept).
    n_rows : int
        Number of data rows in the file.

    Returns
    -------
    list of int
        Positions, each in ``0 .. n_rows - 1``; never empty.

    Raises
    ------
    ValueError
        Unparseable specification, a listed row out of range, or a range that selects no row.
    """
    text = spec.strip().lower()
    available = f"the data has {n_rows} rows (positions 0 to {n_rows - 1})"
    if text == "all":
        return list(range(n_rows))
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 2:
            raise ValueError(
                f"unknown --rows {spec!r}; use START:STOP (e.g. 0:20), a list like 3,7,9, or all"
            )
        start = _non_negative_int(parts[0], "--rows start") if parts[0].strip() else 0
        stop = _non_negative_int(parts[1], "--rows stop") if parts[1].strip() else n_rows
        selected = list(range(start, min(stop, n_rows)))
        if not selected:
            raise ValueError(f"--rows {spec!r} selects no rows; {available}")
        return selected
    try:
        positions = [_non_negative_int(part, "--rows entry") for part in text.split(",")]
    except ValueError:
        raise ValueError(
            f"unknown --rows {spec!r}; use START:STOP (e.g. 0:20), a list like 3,7,9, or all"
        ) from None
    outside = [p for p in positions if p >= n_rows]
    if outside:
        raise ValueError(f"--rows {outside[0]} is out of range; {available}")
    return list(dict.fromkeys(positions))


def format_rows(rows: list) -> str:
    """Rows as a ``--rows`` specification (``parse_rows``'s inverse): ``START:STOP`` for three
    or more consecutive positions, else a comma-separated list; past 10 entries the list ends
    in ``...`` (labels that are not positions are listed)."""
    if len(rows) >= 3 and all(isinstance(r, int) for r in rows) and rows == list(
            range(rows[0], rows[0] + len(rows))):
        return f"{rows[0]}:{rows[-1] + 1}"
    return ",".join(map(str, rows[:10])) + (",..." if len(rows) > 10 else "")


def parse_baseline(spec: str, X: pd.DataFrame,
                   encoder=None) -> tuple[str | np.ndarray, str]:
    """Baseline for ``integrated_gradients`` from a ``--baseline`` specification.

    Parameters
    ----------
    spec : str
        ``typical`` (each numeric column's mean, each text column's most frequent category:
        ``encoder.typical_``; the mean for a table without text columns), ``mean``,
        ``median`` or ``zeros`` (over the training rows, column by column, indicators
        included), or a 0-based data-row position whose feature vector becomes the baseline.
    X : pandas.DataFrame
        Feature table as the model sees it (numeric, already validated).
    encoder : gpexplain.CategoricalEncoder, optional
        The table's encoder (its ``typical_`` row).

    Returns
    -------
    baseline : str or ndarray of shape (n_features,)
    description : str
        For the summary, e.g. ``"mean"`` or ``"row 12"``.

    Raises
    ------
    ValueError
        Unknown specification or a row position out of range.
    """
    text = spec.strip().lower()
    if text == "typical":
        typical = getattr(encoder, "typical_", None)
        if encoder is None or not encoder.categorical_ or typical is None:
            # Without text columns the typical row is the mean (of the training rows, as the
            # library resolves it); a model saved before typical_ existed keeps the mean too.
            return "mean", "mean"
        return np.asarray(typical, dtype=np.float64), "typical"
    if text in BASELINES:
        return text, text
    if text.isdigit():
        position = int(text)
        if position >= len(X):
            raise ValueError(
                f"--baseline row {position} is out of range; the data has {len(X)} rows "
                f"(positions 0 to {len(X) - 1})"
            )
        return X.iloc[position].to_numpy(dtype=np.float64), f"row {position}"
    raise ValueError(
        f"unknown --baseline {spec!r}; use typical, mean, median, zeros or a row position "
        f"0 to {len(X) - 1}"
    )


def check_numeric(frame: pd.DataFrame) -> None:
    """Point at the offending cell of a column of numbers with a stray text marker; other text
    columns are categories (one-hot encoded by ``encode``)."""
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            continue
        converted = pd.to_numeric(values, errors="coerce")
        offending = values.notna() & converted.isna()
        if offending.any() and offending.mean() <= 0.1:  # mostly numbers: a stray marker
            row = offending.idxmax()
            raise TypeError(
                f"column {str(column)!r} is not numeric: row {row} holds {values[row]!r}; "
                "leave missing cells empty and impute or drop those rows"
            )


def read_frame(
    data: str, header: bool | None = None, names: str | None = None, decimal: str = "auto"
) -> pd.DataFrame:
    """``read_table`` with the command line's ``--header/--no-header``, ``--names`` and
    ``--decimal``."""
    choice = {None: "auto", True: "yes", False: "no"}[header]
    column_names = None if names is None else [n.strip() for n in names.split(",")]
    try:
        frame = read_table(data, header=choice, names=column_names, decimal=decimal)
    except (ValueError, TypeError) as error:
        message = str(error).replace("names has", "--names has")
        fail(message.replace("decimal must", "--decimal must"))
    generated = [f"x{j}" for j in range(frame.shape[1])]
    if header is None and names is None and list(frame.columns) == generated:
        # Said once the input is accepted (bad input keeps its one-line error): a wrong
        # guess would otherwise only show in the column names.
        frame.attrs["note"] = (
            f"No header line detected (the first line holds numbers): columns named x0 to "
            f"x{frame.shape[1] - 1}; use --header to take it as the header, --names to name them"
        )
    return frame


def drop_columns(frame: pd.DataFrame, spec: str | None) -> pd.DataFrame:
    """Apply ``--drop a,b``: remove those columns (names, or 0-based positions as for
    ``--target``); ValueError names an unknown one."""
    if spec is None:
        return frame
    names = [
        resolve_target(frame, part.strip(), "--drop") for part in spec.split(",") if part.strip()
    ]
    return frame.drop(columns=names)


def resolve_target(frame: pd.DataFrame, target: str, option: str = "--target") -> str:
    """The name of the column ``target`` designates: itself, or else a 0-based position.

    A name wins over a position (a column may be called ``"3"``); a negative position counts
    from the last column (``-1``: the last). ValueError (naming ``option``) lists the columns
    otherwise.
    """
    columns = [str(c) for c in frame.columns]
    if target in columns:
        return target
    text = target.strip()
    if text.lstrip("-").isdigit():
        position = int(text)
        if -len(columns) <= position < len(columns):
            return columns[position]
        raise ValueError(
            f"{option} position {position} is out of range; the file has {len(columns)} "
            f"columns (positions 0 to {len(columns) - 1}, or -1 for the last)"
        )
    close = difflib.get_close_matches(target, columns, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    what = "target column" if option == "--target" else f"{option} column"
    raise ValueError(
        f"{what} {target!r} not found{hint}; give a column name or a 0-based position; "
        "available columns: " + ", ".join(repr(c) for c in columns)
    )


def resolve_targets(frame: pd.DataFrame, target: str | list[str]) -> str | list[str]:
    """``resolve_target`` of one ``--target`` (a name), or of each of several (a list of
    distinct names: a multi-output regression); ValueError names a repeated one."""
    if isinstance(target, str):
        return resolve_target(frame, target)
    names = [resolve_target(frame, entry) for entry in target]
    repeated = [name for name in dict.fromkeys(names) if names.count(name) > 1]
    if repeated:
        raise ValueError(f"--target {repeated[0]!r} is given more than once; give each target "
                         "column once")
    return names


def handle_missing(frame: pd.DataFrame, missing: str) -> tuple[pd.DataFrame, list]:
    """Apply ``--missing``: ``error`` refuses a missing cell (row and column named), ``drop``
    removes every row with one and returns the labels (0-based data-row numbers) it dropped.

    Kept rows keep their labels, so outputs name rows as they are numbered in the file.
    """
    policy = missing.strip().lower()
    if policy not in MISSING_POLICIES:
        raise ValueError(f"unknown --missing {missing!r}; use {' or '.join(MISSING_POLICIES)}")
    absent = frame.isna().to_numpy()
    rows_with_missing = absent.any(axis=1)
    if not rows_with_missing.any():
        return frame, []
    if policy == "drop" and rows_with_missing.all():
        column = frame.columns[int(np.argmax(absent.sum(axis=0)))]
        raise ValueError(
            f"--missing drop would drop every row: each has a missing value (column "
            f"{str(column)!r} alone misses {int(absent.sum(axis=0).max())} of {len(frame)}); "
            "leave the sparsest columns out with --drop, or fill them in"
        )
    if policy == "error":
        row, column = np.argwhere(absent)[0]
        raise ValueError(
            f"column {str(frame.columns[column])!r} has a missing value at row "
            f"{frame.index[row]!r} ({int(rows_with_missing.sum())} row(s) with missing values "
            "in all); use --missing drop to drop those rows, or fill them in"
        )
    dropped = [int(r) if isinstance(r, int | np.integer) else str(r)
               for r in frame.index[rows_with_missing]]
    return frame.loc[~rows_with_missing], dropped


def split_target(frame: pd.DataFrame, target: str | list[str]
                 ) -> tuple[pd.DataFrame, pd.Series | pd.DataFrame]:
    """Separate the features (validated; text columns are accepted and checked when ``encode``
    one-hot encodes them) from the target column (a Series), or columns (a list of names: a
    DataFrame), validated by the task (``Regression``, ``Classification`` or
    ``MultiOutputRegression.target``); ValueError/TypeError on bad input."""
    columns = [str(c) for c in frame.columns]
    frame = frame.set_axis(columns, axis=1)
    target = resolve_targets(frame, target)
    if len(frame) < 2:
        raise ValueError(f"the data has {len(frame)} row(s); at least 2 are needed to fit a GP")
    X = frame.drop(columns=target)
    if X.shape[1] == 0:
        raise ValueError(f"the data has no feature columns besides the target {target!r}")
    check_numeric(X)
    numeric = [c for c in X.columns if not is_categorical(X[c])]
    if numeric:
        values, _ = as_feature_matrix(X[numeric], "X")  # names the row and column of a NaN/inf
        check_spread(values, numeric)  # the estimators' refusal, before any fit starts
    return X, frame[target]


def select(
    frame: pd.DataFrame, target: str | list[str] | None, drop: str | None, missing: str,
    fitting: bool = True,
) -> tuple[pd.DataFrame, str | list[str] | None, list]:
    """Apply ``--target``, ``--drop`` and ``--missing``: ``(frame, target column (a list of
    them when several are given), dropped rows)``.

    ``fitting``: the target is resolved (a name or a position) and must survive ``--drop``;
    without (``--model-from``) it is the saved model's target name, or None, and its column
    is removed before ``--missing`` applies: a saved model explains rows without their
    target, so a row missing only its target is kept.
    """
    if fitting:
        target = resolve_targets(frame, target)
    frame = drop_columns(frame, drop)
    if fitting:
        for name in [target] if isinstance(target, str) else target:
            if name not in frame.columns:
                raise ValueError(f"--drop removes the target column {name!r}")
    else:
        frame = frame.loc[:, [str(c) != target for c in frame.columns]]
    refuse_empty_columns(frame, target)
    frame, dropped = handle_missing(frame, missing)
    return frame, target, dropped


def refuse_empty_columns(frame: pd.DataFrame, target: str | None) -> None:
    """ValueError naming a column that is missing in every row (a text column of empty
    cells, say): no ``--missing`` policy helps (``drop`` would drop every row), so it says
    to leave the column out with ``--drop``, or to choose another ``--target``."""
    if len(frame) == 0:
        return
    for column in frame.columns:
        if frame[column].isna().all():
            name = str(column)
            remedy = ("choose another --target" if name == target
                      else f"leave it out with --drop {name}")
            raise ValueError(
                f"column {name!r} has no values (missing in all {len(frame)} rows); {remedy} "
                "(--missing drop would drop every row)"
            )


def encode(X: pd.DataFrame) -> tuple[CategoricalEncoder, pd.DataFrame]:
    """``(encoder, X_model)``: text columns one-hot encoded; the model sees ``X_model``, the
    outputs name ``X``'s columns (``encoder.group``). Numeric tables pass unchanged."""
    encoder = CategoricalEncoder().fit(X)
    return encoder, encoder.transform(X)


def row_labels(X: pd.DataFrame, positions: list[int]) -> list:
    """The data-row labels (file numbering, kept through ``--missing drop``) of ``positions``."""
    labels = [int(r) if isinstance(r, int | np.integer) else str(r) for r in X.index]
    return [labels[p] for p in positions]


def say_what_was_read(
    stderr: Console, frame: pd.DataFrame, dropped: list, n_remaining: int
) -> None:
    """Say how the header was guessed (``read_frame``'s note) and which rows ``--missing
    drop`` removed, once the input is accepted."""
    note = frame.attrs.get("note")
    if note:
        say(stderr, note)
    if dropped:
        shown = ", ".join(map(str, dropped[:10])) + (", ..." if len(dropped) > 10 else "")
        say(stderr, f"Dropped {len(dropped)} row(s) with missing values (data rows {shown}); "
                    f"{n_remaining} remain")
