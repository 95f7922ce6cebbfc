"""Reading a user's tabular file (CSV with any common delimiter, or Parquet)."""

from __future__ import annotations

import bz2
import csv
import gzip
import lzma
import os
from pathlib import Path

import pandas as pd

__all__ = ["read_table"]

PARQUET_SUFFIXES = (".parquet", ".pq")
DELIMITERS = ",;\t|"
_SAMPLE_LINES = 20
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def _sample(path: Path, n_lines: int = _SAMPLE_LINES) -> tuple[str, str]:
    """First lines of a text file and the encoding that decodes them."""
    opener = _OPENERS.get(path.suffix.lower(), open)
    with opener(path, "rb") as handle:
        raw = b"".join(line for _, line in zip(range(n_lines), handle, strict=False))
    if b"\x00" in raw:
        raise ValueError("it looks like a binary file, not CSV text; save it as CSV or Parquet")
    for encoding in ("utf-8-sig", "latin-1"):
        try:
            return raw.decode(encoding), encoding
        except UnicodeDecodeError:
            continue
    raise AssertionError("latin-1 decodes every byte string")  # pragma: no cover


def _detect_delimiter(sample: str) -> str:
    """Delimiter of a CSV sample: csv.Sniffer restricted to ``,;<tab>|``; ``,`` if unsure."""
    try:
        return csv.Sniffer().sniff(sample, delimiters=DELIMITERS).delimiter
    except csv.Error:  # one column, or no consistent delimiter: let pandas use commas
        return ","


def read_table(path) -> pd.DataFrame:
    """Read a CSV or Parquet file into a DataFrame.

    Parquet is recognised by the extension ``.parquet`` or ``.pq``. Anything else is read as
    delimited text (optionally ``.gz``/``.bz2``/``.xz`` compressed): the delimiter is detected
    with ``csv.Sniffer`` on the first 20 lines among comma, semicolon, tab and ``|`` (the UCI
    wine files, for instance, are semicolon-separated with a quoted header), falling back to a
    comma. The first line is the header. Text is decoded as UTF-8 (a byte-order mark is
    ignored), falling back to Latin-1.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    pandas.DataFrame
        Columns as in the file, a default ``RangeIndex`` (row ``i`` is the ``i``-th data row,
        counted from 0 after the header).

    Raises
    ------
    TypeError
        ``path`` is not a string or path.
    ValueError
        The file does not exist, is a directory, is empty, or cannot be parsed; the one-line
        message names the path.
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a string or a path, got {type(path).__name__}.")
    path = Path(path)
    if not path.exists():
        raise ValueError(f"cannot read {str(path)!r}: no such file.")
    if not path.is_file():
        raise ValueError(f"cannot read {str(path)!r}: not a regular file.")
    if path.stat().st_size == 0:
        raise ValueError(f"cannot read {str(path)!r}: the file is empty.")
    try:
        if path.suffix.lower() in PARQUET_SUFFIXES:
            return pd.read_parquet(path)
        sample, encoding = _sample(path)
        if not sample.strip():
            raise ValueError("the file is empty")
        delimiter = _detect_delimiter(sample)
        return pd.read_csv(path, sep=delimiter, encoding=encoding)
    except (ValueError, OSError, pd.errors.ParserError) as error:
        # pandas' EmptyDataError and ParserError and pyarrow's ArrowInvalid are ValueErrors.
        reason = " ".join(str(error).split()).rstrip(".") or type(error).__name__
        raise ValueError(f"cannot read {str(path)!r}: {reason}.") from None
