"""Reading a user's tabular file as it is: CSV with any common delimiter or whitespace, with or
without a header, Excel, or Parquet."""

from __future__ import annotations

import bz2
import codecs
import csv
import gzip
import lzma
import os
import re
import zipfile
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path

import pandas as pd

__all__ = ["read_table", "DECIMAL_CHOICES", "HEADER_CHOICES", "MISSING_MARKERS"]

PARQUET_SUFFIXES = (".parquet", ".pq")
EXCEL_SUFFIXES = (".xlsx", ".xlsm")
DELIMITERS = ",;\t|"
WHITESPACE = r"\s+"
HEADER_CHOICES = ("auto", "yes", "no")
DECIMAL_CHOICES = ("auto", ".", ",")
# The only cells read as missing (exactly these, case included), as the README lists them:
# empty, R's NA, NaN, null and the UCI convention "?" (wpbc, auto MPG). pandas' other default
# markers ("None", "N/A", "NULL", "#N/A", "nan", ...) are values: "None" is a real category
# in survey files ("no air bags"), and taking it as missing silently dropped their rows.
MISSING_MARKERS = ("", "NA", "NaN", "null", "?")
_SAMPLE_LINES = 20
_CHUNK_BYTES = 1 << 20
# Limits on what a file may hold before any parser builds it in memory: a 6 MB .gz that
# expands past 8 GiB, a 2 GB single line, a million columns or an .xlsx zip bomb exhausted the
# machine (or ran for minutes) before any message. Each is far beyond a table a GP can fit.
MAX_DECOMPRESSED_BYTES = 2 << 30  # a compressed text file, decompressed
# CSV text compresses 2-10 fold (the data sets in ../shared/data: 2-10); a gzip bomb near
# deflate's limit of 1032. Past the floor, a higher ratio is refused as soon as it is seen (the
# 2 GiB above took 3 s of decompression to reach); an uncompressed file is not limited by it.
MAX_COMPRESSION_RATIO = 200
_COMPRESSION_RATIO_FLOOR = 256 << 20
MAX_LINE_BYTES = 100 << 20  # one line of a text file
MAX_COLUMNS = 100_000
MAX_EXCEL_BYTES = 1 << 30  # the sum of the .xlsx zip members' declared (expanded) sizes
# Sheet XML compresses about 5-20 fold; a much higher ratio over a large expansion is a bomb.
MAX_EXCEL_RATIO = 100
_EXCEL_RATIO_FLOOR = 64 << 20
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^[+-]?(inf|infinity|nan)$", re.I)
# A number written with a decimal comma, as R's write.csv2 and European spreadsheets write it.
_COMMA_NUMBER = re.compile(r"^[+-]?(\d+,?\d*|,\d+)([eE][+-]?\d+)?$")


def _size(n_bytes: int) -> str:
    """A byte count as a reader takes it in: ``"2 GiB"``, ``"100 MiB"``, ``"512 bytes"``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes} bytes"


def _sample(path: Path, n_lines: int = _SAMPLE_LINES) -> tuple[str, str]:
    """First lines of a text file, decoded, and the encoding that decodes the whole file.

    The whole file is scanned first (``_scan``), so the lines read here are within
    ``MAX_LINE_BYTES``; the first line's field count is checked against ``MAX_COLUMNS`` before
    the delimiter sniffer sees it.
    """
    encoding = _scan(path)
    opener = _OPENERS.get(path.suffix.lower(), open)
    with opener(path, "rb") as handle:
        raw = b"".join(line for _, line in zip(range(n_lines), handle, strict=False))
    if b"\x00" in raw:
        raise ValueError(
            "it looks like a binary file, not CSV text; save it as CSV, Excel (.xlsx) or Parquet"
        )
    first = raw.split(b"\n", 1)[0]
    # An upper bound on the columns whatever the delimiter turns out to be.
    n_fields = max([first.count(d.encode()) + 1 for d in DELIMITERS] + [len(first.split())])
    if n_fields > MAX_COLUMNS:
        raise ValueError(
            f"its first line has {n_fields} fields, more than the {MAX_COLUMNS} columns "
            "gpexplain reads"
        )
    return raw.decode(encoding), encoding


def _scan(path: Path) -> str:
    """The encoding of a text file, after checking its size and line lengths in one pass.

    Returns ``"utf-8-sig"`` if the whole (decompressed) file is UTF-8, else ``"latin-1"``. The
    whole file is checked, in chunks, because a Latin-1 byte can sit anywhere (one at line 41
    made pandas refuse a file whose first lines decoded as UTF-8). The same pass stops at
    ``MAX_DECOMPRESSED_BYTES`` of a compressed file (or earlier, at a compression ratio a
    table does not have: ``_check_decompressed``) and at a line longer than
    ``MAX_LINE_BYTES``, so neither is ever held in memory whole.
    """
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    opener = _OPENERS.get(path.suffix.lower())
    utf8, total, line = True, 0, 0  # line: bytes since the last newline
    with (
        open(path, "rb") as raw,  # raw.tell(): the compressed bytes read so far
        nullcontext(raw) if opener is None else opener(raw, "rb") as handle,
    ):
        while chunk := handle.read(_CHUNK_BYTES):
            total += len(chunk)
            if opener is not None:
                _check_decompressed(total, raw.tell())
            first, last = chunk.find(b"\n"), chunk.rfind(b"\n")
            longest = line + first if first != -1 else 0  # the line ending in this chunk
            if first != last and MAX_LINE_BYTES < len(chunk):  # whole lines inside the chunk
                longest = max([longest] + [len(p) for p in chunk[first + 1 : last].split(b"\n")])
            line = line + len(chunk) if first == -1 else len(chunk) - last - 1
            if max(line, longest) > MAX_LINE_BYTES:
                raise ValueError(
                    f"it has a line longer than {_size(MAX_LINE_BYTES)}, the limit; "
                    "is it really a table?"
                )
            if utf8:
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError:
                    utf8 = False  # latin-1 decodes every byte string
    if utf8:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            utf8 = False
    return "utf-8-sig" if utf8 else "latin-1"


def _check_decompressed(total: int, compressed: int) -> None:
    """Refuse a compressed file once ``total`` decompressed bytes (from ``compressed`` bytes
    read) pass ``MAX_DECOMPRESSED_BYTES``, or pass ``_COMPRESSION_RATIO_FLOOR`` at more than
    ``MAX_COMPRESSION_RATIO`` times what was read (ValueError)."""
    if total > MAX_DECOMPRESSED_BYTES:
        raise ValueError(
            f"decompressed, it holds more than {_size(MAX_DECOMPRESSED_BYTES)}, the limit for "
            "a compressed file"
        )
    if total > _COMPRESSION_RATIO_FLOOR and total > MAX_COMPRESSION_RATIO * compressed:
        raise ValueError(
            f"decompressed, it expands more than {MAX_COMPRESSION_RATIO} fold ({_size(total)} "
            f"from {_size(compressed)} of the file): a compression "
            "bomb, not a table of data; if it is a real table, decompress it and give that file"
        )


def _detect_delimiter(sample: str, decimal: str = "auto") -> str:
    """Delimiter of a text sample: csv.Sniffer restricted to ``,;<tab>|`` (``;<tab>|`` with a
    decimal comma); failing that, runs of whitespace when no ``,;|`` occurs and every line
    splits into the same number (> 1) of fields; otherwise ``,`` (``;`` with a decimal
    comma)."""
    delimiters = DELIMITERS.replace(",", "") if decimal == "," else DELIMITERS
    try:
        return csv.Sniffer().sniff(sample, delimiters=delimiters).delimiter
    except csv.Error:  # one column, or no consistent delimiter
        pass
    lines = [line for line in sample.splitlines() if line.strip()]
    if lines and not any(d in sample for d in ",;|"):  # a tab is whitespace too
        counts = {len(line.split()) for line in lines}
        if len(counts) == 1 and counts.pop() > 1:
            return WHITESPACE
    return ";" if decimal == "," else ","


def _ends_with_delimiter(sample: str, delimiter: str) -> bool:
    """True when every data line of the sample (after the first) ends with the delimiter, as
    many exporters write: pandas would otherwise take the first column as the row index and
    shift every column one place left."""
    lines = [line.rstrip("\r\n") for line in sample.splitlines() if line.strip()]
    return delimiter != WHITESPACE and len(lines) > 1 and all(
        line.endswith(delimiter) for line in lines[1:]
    )


def _all_comma_numbers(cells: pd.Series) -> bool:
    return bool(cells.str.match(_COMMA_NUMBER).all() and cells.str.contains(",").any())


def _has_decimal_comma(frame: pd.DataFrame) -> bool:
    """True when some text column holds only numbers written with a decimal comma and no
    column holds a number with a decimal point (which a decimal comma would make text)."""
    comma_columns = [
        column
        for column in frame.columns
        if not pd.api.types.is_numeric_dtype(frame[column])
        and frame[column].notna().any()
        and _all_comma_numbers(frame[column].dropna().astype(str).str.strip())
    ]
    point_fractions = any(
        pd.api.types.is_float_dtype(frame[column])
        and (frame[column].dropna() % 1 != 0).any()
        for column in frame.columns
    )
    return bool(comma_columns) and not point_fractions


def _fields(sample: str, delimiter: str) -> list[list[str]]:
    lines = [line for line in sample.splitlines() if line.strip()]
    if delimiter == WHITESPACE:
        return [line.split() for line in lines]
    return [[cell.strip() for cell in row] for row in csv.reader(lines, delimiter=delimiter)]


def _is_number(cell: str) -> bool:
    return bool(_NUMBER.match(cell.strip()))


def _first_line_is_data(rows: list[list[str]]) -> bool:
    """True when the first line is unambiguously a data row, not a header.

    The numeric columns are those whose cells below the first line are all numbers or
    missing markers (at least one number). The first line is data when there is at least
    one numeric column and its cell in every numeric column is a number; a header names
    its columns, so a header cell in a numeric column is text. Anything else keeps the
    first line as the header.
    """
    if len(rows) < 2:
        return False
    width = len(rows[0])
    body = [row for row in rows[1:] if len(row) == width]
    numeric = [
        j
        for j in range(width)
        if body
        and all(_is_number(r[j]) or r[j] in MISSING_MARKERS for r in body)
        and any(_is_number(r[j]) for r in body)
    ]
    return bool(numeric) and all(_is_number(rows[0][j]) for j in numeric)


def _column_names(names, n_columns: int) -> list[str]:
    if names is None:
        return [f"x{j}" for j in range(n_columns)]
    names = [str(name).strip() for name in names]
    if len(names) != n_columns:
        raise ValueError(f"names has {len(names)} entries but the file has {n_columns} columns")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated or "" in names:
        raise ValueError(f"names must be distinct and non-empty, got {names}")
    return names


def _check_header(header: str) -> str:
    if not isinstance(header, str) or header.strip().lower() not in HEADER_CHOICES:
        raise ValueError(f"header must be one of {', '.join(HEADER_CHOICES)}, got {header!r}")
    return header.strip().lower()


def _check_decimal(decimal: str) -> str:
    if not isinstance(decimal, str) or decimal.strip().lower() not in DECIMAL_CHOICES:
        raise ValueError(
            f"decimal must be one of {', '.join(map(repr, DECIMAL_CHOICES))}, got {decimal!r}"
        )
    return decimal.strip().lower()


def read_table(
    path,
    *,
    header: str = "auto",
    names: Sequence[str] | None = None,
    sheet=0,
    decimal: str = "auto",
) -> pd.DataFrame:
    """Read a CSV, whitespace-separated, Excel or Parquet file into a DataFrame.

    Parquet is recognised by the extension ``.parquet`` or ``.pq``, Excel by ``.xlsx`` or
    ``.xlsm`` (read by pandas with openpyxl; ``sheet`` chooses the worksheet). Anything else is
    read as delimited text (optionally ``.gz``/``.bz2``/``.xz`` compressed): the delimiter is
    detected with ``csv.Sniffer`` on the first 20 lines among comma, semicolon, tab and ``|``
    (the UCI wine files, for instance, are semicolon-separated with a quoted header); when none
    of these occurs and every line splits on runs of whitespace into the same number of fields
    (the UCI auto MPG file), whitespace separates the columns; otherwise a comma. Lines that
    end with the delimiter (a trailing comma) are read as they are meant, the empty last field
    dropped. Text is decoded as UTF-8 (a byte-order mark is ignored) when the whole file is
    UTF-8, else as Latin-1. Exactly the cells in ``MISSING_MARKERS`` are missing values (NaN):
    empty cells, ``NA``, ``NaN``, ``null`` and ``?``; other text (``None``, ``N/A``, ``NULL``,
    ``nan``, ...) is a value. What to do with missing values is the caller's decision.

    Parameters
    ----------
    path : str or os.PathLike
    header : {"auto", "yes", "no"}, default "auto"
        Whether the first line names the columns. ``"auto"`` decides only where it is
        unambiguous: the first line is taken as data when, in every column whose other sample
        cells are numbers, it holds a number too (UCI files such as abalone, wdbc, wpbc and auto
        MPG); otherwise it is the header. Parquet always has names; for Excel ``"auto"`` applies
        the same rule to the first rows of the sheet.
    names : sequence of str, optional
        Column names, one per column. With a header line they replace its names; without one
        they name the columns. Default for a headerless file: ``x0, x1, ...``.
    sheet : int or str, default 0
        Worksheet of an Excel file (position or name).
    decimal : {"auto", ".", ","}, default "auto"
        Decimal mark of a text file (Excel and Parquet store numbers as numbers). ``"auto"``
        takes a decimal comma, as R's ``write.csv2`` writes (``;`` between fields, ``9,5``),
        when the fields are not comma-separated, some column read as text holds only numbers
        written with a decimal comma, and no column holds a number with a decimal point.

    Returns
    -------
    pandas.DataFrame
        A default ``RangeIndex``: row ``i`` is the ``i``-th data row, counted from 0 after the
        header (if any).

    Raises
    ------
    TypeError
        ``path`` is not a string or path.
    ValueError
        The file does not exist, is a directory, is empty or cannot be parsed (the message names
        the path); ``header`` or ``decimal`` is not one of the choices; ``names`` has the
        wrong length or repeats a name. Also, before anything is parsed, a file past a limit:
        a compressed text file that decompresses to more than ``MAX_DECOMPRESSED_BYTES``
        (2 GiB), a line longer than ``MAX_LINE_BYTES`` (100 MiB), more than ``MAX_COLUMNS``
        (100,000) columns, or an Excel file whose zip members expand past ``MAX_EXCEL_BYTES``
        (1 GiB) or ``MAX_EXCEL_RATIO`` times its size.
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a string or a path, got {type(path).__name__}.")
    header = _check_header(header)
    decimal = _check_decimal(decimal)
    if names is not None and (isinstance(names, str) or not isinstance(names, Sequence)):
        raise TypeError(f"names must be a sequence of column names, got {type(names).__name__}.")
    path = Path(path)
    if not path.exists():
        raise ValueError(f"cannot read {str(path)!r}: no such file.")
    if not path.is_file():
        raise ValueError(f"cannot read {str(path)!r}: not a regular file.")
    if path.stat().st_size == 0:
        raise ValueError(f"cannot read {str(path)!r}: the file is empty.")
    suffix = path.suffix.lower()
    try:
        if suffix in PARQUET_SUFFIXES:
            _check_parquet_columns(path)
            frame = pd.read_parquet(path)
            if names is not None:
                frame.columns = _column_names(names, frame.shape[1])
            return frame
        if suffix in EXCEL_SUFFIXES:
            return _read_excel(path, header, names, sheet)
        sample, encoding = _sample(path)
        if not sample.strip():
            raise ValueError("the file is empty")
        delimiter = _detect_delimiter(sample, decimal)
        fields = _fields(sample, delimiter)
        if decimal == ",":  # "9,5" is a number for the header detection
            fields = [[cell.replace(",", ".") for cell in row] for row in fields]
        has_header = header == "yes" or (header == "auto" and not _first_line_is_data(fields))
        trailing = _ends_with_delimiter(sample, delimiter)

        def parse(mark: str) -> pd.DataFrame:
            return pd.read_csv(
                path, sep=delimiter, encoding=encoding, header=0 if has_header else None,
                keep_default_na=False, na_values=list(MISSING_MARKERS), decimal=mark,
                index_col=False if trailing else None,
                engine="python" if delimiter == WHITESPACE else "c",
            )

        frame = parse("," if decimal == "," else ".")
        if decimal == "auto" and delimiter != "," and _has_decimal_comma(frame):
            frame = parse(",")
        if trailing and (not has_header or fields[0][-1] == "") and frame.iloc[:, -1].isna().all():
            frame = frame.iloc[:, :-1]  # the empty field after the trailing delimiter
        if not has_header or names is not None:
            frame.columns = _column_names(names, frame.shape[1])
        return frame
    except (ValueError, OSError, pd.errors.ParserError) as error:
        # pandas' EmptyDataError and ParserError and pyarrow's ArrowInvalid are ValueErrors.
        reason = " ".join(str(error).split()).rstrip(".") or type(error).__name__
        raise ValueError(f"cannot read {str(path)!r}: {reason}.") from None


def _check_excel_expansion(path: Path) -> None:
    """Refuse an .xlsx (a zip) whose members would expand past ``MAX_EXCEL_BYTES``, or past
    ``MAX_EXCEL_RATIO`` times the file's size, before openpyxl decompresses any of them.

    The declared sizes bound what is decompressed: ``zipfile`` stops reading a member at its
    declared ``file_size`` (and fails its CRC check), so a header that lies cannot expand more.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            expanded = sum(info.file_size for info in archive.infolist())
    except zipfile.BadZipFile:
        return  # not a zip: pandas says what it is not
    on_disk = max(path.stat().st_size, 1)
    if expanded > MAX_EXCEL_BYTES or (
        expanded > _EXCEL_RATIO_FLOOR and expanded > MAX_EXCEL_RATIO * on_disk
    ):
        raise ValueError(
            f"its zip members expand to {_size(expanded)} from {_size(on_disk)} (limits: "
            f"{_size(MAX_EXCEL_BYTES)}, and {MAX_EXCEL_RATIO} times the file); save the sheet as "
            "CSV if it is a real table"
        )


def _check_parquet_columns(path: Path) -> None:
    """Refuse a Parquet file with more than ``MAX_COLUMNS`` columns from its footer alone."""
    import pyarrow.parquet as pq

    n_columns = pq.ParquetFile(path).metadata.num_columns
    if n_columns > MAX_COLUMNS:
        raise ValueError(
            f"it has {n_columns} columns, more than the {MAX_COLUMNS} gpexplain reads"
        )


def _read_excel(path: Path, header: str, names, sheet) -> pd.DataFrame:
    """One worksheet through pandas and openpyxl; header detection as for text files."""
    _check_excel_expansion(path)
    try:
        raw = pd.read_excel(
            path, sheet_name=sheet, header=None, keep_default_na=False,
            na_values=list(MISSING_MARKERS),
        )
    except ImportError:
        raise ValueError(
            "reading Excel files needs openpyxl (pip install openpyxl)"
        ) from None
    cells = [["" if pd.isna(v) else str(v) for v in row] for row in raw.head(_SAMPLE_LINES).values]
    has_header = header == "yes" or (header == "auto" and not _first_line_is_data(cells))
    if has_header:
        frame = raw.iloc[1:].reset_index(drop=True)
        frame.columns = [str(v).strip() for v in raw.iloc[0]]
        frame = frame.infer_objects()
    else:
        frame = raw
    if not has_header or names is not None:
        frame.columns = _column_names(names, frame.shape[1])
    return frame
