"""Files as users have them: headerless and whitespace-separated text, Excel, missing values,
a target given by position (``read_table`` and the ``explain`` options built on it)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import gpexplain as gx
from gpexplain._validation import as_feature_matrix
from gpexplain.cli import app
from gpexplain.cli.reading import handle_missing, resolve_target
from gpexplain.datasets import read_table
from tests.test_cli import one_start

runner = CliRunner()


def _frame(n_rows: int = 30, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"a": rng.uniform(-2, 2, n_rows), "b": rng.uniform(0, 5, n_rows)})
    frame["y"] = np.sin(frame["a"]) + 0.4 * frame["b"] + 0.05 * rng.normal(size=n_rows)
    return frame


@pytest.fixture
def single_start(monkeypatch):
    """One optimiser start: fit quality is not the subject here."""
    one_start(monkeypatch)


# -- read_table ----------------------------------------------------------------------------
def test_headerless_file_is_detected_and_named(tmp_path):
    path = tmp_path / "plain.data"
    path.write_text("M,0.5,3\nF,0.25,4\nI,1e-3,5\n")
    table = read_table(path)
    assert list(table.columns) == ["x0", "x1", "x2"]
    assert table["x0"].tolist() == ["M", "F", "I"] and table["x1"].tolist() == [0.5, 0.25, 1e-3]
    named = read_table(path, names=["sex", "length", "rings"])
    assert list(named.columns) == ["sex", "length", "rings"] and len(named) == 3


@pytest.mark.parametrize(
    ("text", "header"),
    [
        ("a,b\n1,2\n3,4\n", True),  # names over numbers
        ("1,2\n3,4\n", False),  # numbers throughout
        ("city,b\nTaipei,2\nTainan,4\n", True),  # text column, header over the number column
        ("id,2019\n1,4\n2,5\n", True),  # a header with a numeric name stays a header
        ("label\nx\ny\n", True),  # no numeric column: nothing to decide on, keep the header
    ],
)
def test_header_detection_only_where_unambiguous(tmp_path, text, header):
    path = tmp_path / "t.csv"
    path.write_text(text)
    table = read_table(path)
    assert len(table) == text.count("\n") - (1 if header else 0)
    assert (list(table.columns)[0] != "x0") == header


def test_header_forced_either_way(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("1,2\n3,4\n")
    assert list(read_table(path, header="yes").columns) == ["1", "2"]
    path.write_text("a,b\n1,2\n")
    assert read_table(path, header="no")["x0"].tolist() == ["a", "1"]
    assert list(read_table(path, header="yes", names=["u", "v"]).columns) == ["u", "v"]


def test_whitespace_separated_with_missing_markers(tmp_path):
    path = tmp_path / "auto.txt"
    path.write_text("18.0   8   307.0   130.0\n25.0\t4  98.00   NaN\n21.0   6   200.0   ?\n")
    table = read_table(path)
    assert table.shape == (3, 4)
    assert table["x3"].isna().tolist() == [False, True, True]
    assert table["x0"].tolist() == [18.0, 25.0, 21.0]


def test_excel_round_trip(tmp_path):
    frame = _frame(5).assign(city=["a", "b", "c", "d", "e"])
    path = tmp_path / "t.xlsx"
    frame.to_excel(path, index=False)
    table = read_table(path)
    assert list(table.columns) == list(frame.columns)
    np.testing.assert_allclose(table[["a", "b", "y"]].to_numpy(float), frame[["a", "b", "y"]])
    assert table["city"].tolist() == frame["city"].tolist()
    frame.iloc[:, :3].to_excel(path, index=False, header=False)
    assert list(read_table(path).columns) == ["x0", "x1", "x2"]


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"header": "maybe"}, ValueError, "header must be one of"),
        ({"names": ["a"]}, ValueError, "1 entries but the file has 2 columns"),
        ({"names": ["a", "a"]}, ValueError, "distinct"),
        ({"names": "a,b"}, TypeError, "sequence of column names"),
    ],
)
def test_read_table_options_are_validated(tmp_path, kwargs, error, fragment):
    path = tmp_path / "t.csv"
    path.write_text("1,2\n3,4\n")
    with pytest.raises(error, match=fragment):
        read_table(path, **kwargs)


def test_only_the_listed_missing_markers_are_missing(tmp_path):
    # pandas' other default markers are values: "None" is a category ("no air bags").
    text = "airbags,size\nNone,1\nN/A,2\nNULL,3\n#N/A,4\nnan,5\nNA,6\n,7\nnull,8\n?,9\nNaN,10\n"
    path = tmp_path / "cars.csv"
    path.write_text(text)
    expected = ["None", "N/A", "NULL", "#N/A", "nan", None, None, None, None, None]
    table = read_table(path)
    assert [None if pd.isna(v) else v for v in table["airbags"]] == expected
    pd.read_csv(path, keep_default_na=False).to_excel(tmp_path / "cars.xlsx", index=False)
    excel = read_table(tmp_path / "cars.xlsx")
    # "#N/A" is Excel's not-available error cell, which pandas reads as missing.
    assert [None if pd.isna(v) else v for v in excel["airbags"]] == [
        None if v == "#N/A" else v for v in expected
    ]


@pytest.mark.parametrize(
    ("text", "header"),
    [("a,b,c\n1,2,3,\n4,5,6,\n", True), ("a,b,c,\n1,2,3,\n4,5,6,\n", True),
     ("1,2,3,\n4,5,6,\n", False)],
)
def test_lines_ending_with_the_delimiter_are_not_shifted(tmp_path, text, header):
    path = tmp_path / "trailing.csv"
    path.write_text(text)
    table = read_table(path)
    assert list(table.columns) == (["a", "b", "c"] if header else ["x0", "x1", "x2"])
    assert table.index.tolist() == [0, 1] and table.to_numpy().tolist() == [[1, 2, 3], [4, 5, 6]]


def test_r_row_names_without_a_trailing_delimiter_still_read_as_before(tmp_path):
    path = tmp_path / "rownames.csv"  # R's write.table: no header field over the row names
    path.write_text('"a","b"\n"r1",1,2\n"r2",3,4\n')
    table = read_table(path)
    assert table.index.tolist() == ["r1", "r2"] and table["b"].tolist() == [2, 4]


def test_decimal_comma_of_r_write_csv2_is_detected(tmp_path):
    path = tmp_path / "csv2.csv"
    path.write_text('"x";"y";"g"\n9,5;1,25;"a"\n3;2,5;"b"\n4,75;NA;"a"\n-1,5e-03;7;"b"\n')
    table = read_table(path)
    assert table["x"].tolist() == [9.5, 3.0, 4.75, -1.5e-3] and table["y"].iloc[1] == 2.5
    assert table["g"].tolist() == ["a", "b", "a", "b"]
    assert read_table(path, decimal=".")["x"].tolist()[0] == "9,5"
    headerless = tmp_path / "csv2.txt"  # csv.Sniffer alone takes the comma as the delimiter
    headerless.write_text("9,5;1,25\n3,25;2,5\n")
    assert read_table(headerless, decimal=",").to_numpy().tolist() == [[9.5, 1.25], [3.25, 2.5]]
    with pytest.raises(ValueError, match="decimal must be one of"):
        read_table(path, decimal=";")


def test_decimal_point_files_are_not_taken_for_decimal_commas(tmp_path):
    path = tmp_path / "wine.csv"  # a comma in a text column next to decimal points
    path.write_text('x;y;note\n1.5;1;"1,5"\n2.5;2;"2,5"\n')
    table = read_table(path)
    assert table["x"].tolist() == [1.5, 2.5] and table["note"].tolist() == ["1,5", "2,5"]


def test_encoding_is_guessed_from_the_whole_file(tmp_path):
    path = tmp_path / "late.csv"  # a Latin-1 byte after the first lines
    path.write_bytes(b"id,town\n" + b"".join(b"%d,a\n" % i for i in range(40)) + b"40,caf\xe9\n")
    table = read_table(path)
    assert len(table) == 41 and table["town"].iloc[-1] == "caf\u00e9"


# -- real files (GPEXPLAIN_DATA_DIR) -------------------------------------------------------
@pytest.mark.parametrize(
    ("relative", "shape", "first"),
    [
        ("abalone/abalone.data", (4177, 9), "M"),
        ("breast_cancer_wisconsin/wdbc.data", (569, 32), 842302),
        ("breast_cancer_wisconsin/wpbc.data", (198, 35), 119513),
        ("auto_mpg/autompg.txt", (398, 8), 18.0),
    ],
)
def test_uci_headerless_files(data_dir, relative, shape, first):
    table = read_table(data_dir / relative)
    assert table.shape == shape and table.iloc[0, 0] == first
    assert list(table.columns) == [f"x{j}" for j in range(shape[1])]


def test_uci_missing_markers_are_missing(data_dir):
    wpbc = read_table(data_dir / "breast_cancer_wisconsin/wpbc.data")
    assert int(wpbc.isna().any(axis=1).sum()) == 4 and wpbc["x34"].isna().sum() == 4
    mpg = read_table(data_dir / "auto_mpg/autompg.txt")
    assert mpg["x3"].isna().sum() == 6  # horsepower


def test_taipei_excel_original_equals_the_csv(data_dir):
    folder = data_dir / "taipei_real_estate"
    excel = read_table(folder / "real_estate_valuation.xlsx")
    text = read_table(folder / "real_estate_valuation.csv")
    assert list(excel.columns) == list(text.columns)
    np.testing.assert_allclose(excel.to_numpy(float), text.to_numpy(float), rtol=1e-12)


# -- command-line helpers ------------------------------------------------------------------
def test_resolve_target_by_name_then_position():
    frame = pd.DataFrame(columns=["a", "3", "y"])
    assert resolve_target(frame, "y") == "y"
    assert resolve_target(frame, "3") == "3"  # a name wins over a position
    assert resolve_target(frame, "0") == "a" and resolve_target(frame, "-1") == "y"
    with pytest.raises(ValueError, match="position 5 is out of range"):
        resolve_target(frame, "5")
    with pytest.raises(ValueError, match="'price' not found"):
        resolve_target(frame, "price")


def test_handle_missing_reports_dropped_rows():
    frame = pd.DataFrame({"a": [1.0, np.nan, 3.0, 4.0], "b": ["u", "v", None, "w"]})
    kept, dropped = handle_missing(frame, "drop")
    assert dropped == [1, 2] and kept.index.tolist() == [0, 3]
    with pytest.raises(ValueError, match=r"column 'a' has a missing value at row 1 \(2 row"):
        handle_missing(frame, "error")
    with pytest.raises(ValueError, match="unknown --missing 'skip'"):
        handle_missing(frame, "skip")
    assert handle_missing(frame.dropna(), "error")[1] == []


# -- the explain command on such files -----------------------------------------------------
def test_explain_headerless_whitespace_file_with_missing_rows(tmp_path, single_start):
    frame = _frame()
    frame.loc[[4, 11], "b"] = np.nan
    path = tmp_path / "plain.txt"
    path.write_text(frame[["y", "a", "b"]].to_string(header=False, index=False, na_rep="?"))
    out = tmp_path / "out"
    arguments = ["explain", str(path), "--target", "0", "--rows", "3:6", "--no-holdout"]
    refused = runner.invoke(app, [*arguments, "--out", str(out)])
    assert refused.exit_code == 2 and "row 4" in refused.stderr and "--missing drop" in (
        refused.stderr
    )
    assert refused.stderr.count("\n") == 1  # bad input: one line, no note
    accepted = runner.invoke(app, [*arguments, "--missing", "drop", "--out", str(out)])
    assert accepted.exit_code == 0, accepted.output
    assert "No header line detected" in accepted.stderr and "x0 to x2" in accepted.stderr
    result = runner.invoke(
        app, [*arguments, "--names", "target,a,b", "--missing", "drop", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "Dropped 2 row(s)" in result.stderr and "4, 11" in result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["target"] == "target" and summary["feature_names"] == ["a", "b"]
    assert summary["missing"] == {"policy": "drop", "dropped_rows": [4, 11]}
    table = pd.read_csv(out / "attributions.csv")
    # --rows 3:6 are positions among the kept rows; the row column keeps the file's numbering.
    assert table["row"].unique().tolist() == [3, 5, 6]
    kept = frame.drop(index=[4, 11])
    np.testing.assert_allclose(
        table.loc[table["feature"] == "a", "value"], kept["a"].iloc[3:6], atol=1e-6
    )  # to_string writes 6 decimals


def test_explain_names_and_no_header_errors(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("1,2,3\n4,5,6\n")
    result = runner.invoke(
        app, ["explain", str(path), "--target", "y", "--names", "a,b", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2 and "--names has 2 entries" in result.stderr


# -- numbers float64 cannot carry -------------------------------------------------------------
def test_parquet_integers_beyond_2_53_are_refused_naming_the_column(tmp_path):
    # 64-bit identifiers: as float64 these all become 2**53 + 2, a "constant" column.
    frame = pd.DataFrame({"id": [2**53 + 1, 2**53 + 2, 2**53 + 3], "a": [1, 2, 3]})
    frame.to_parquet(tmp_path / "ids.parquet")
    table = read_table(tmp_path / "ids.parquet")
    assert table["id"].tolist() == frame["id"].tolist()  # read exactly
    with pytest.raises(ValueError, match=r"column 'id' holds integers beyond 2\*\*53 "
                                         r"\(9007199254740993 at row 0, 3 in all\)"):
        as_feature_matrix(table)
    with pytest.raises(ValueError, match="column 'x0' holds integers beyond"):
        as_feature_matrix(table.to_numpy())
    assert as_feature_matrix(pd.DataFrame({"a": [2**53, -(2**53)]}))[0].tolist() == [
        [2.0**53], [-(2.0**53)]
    ]


@pytest.mark.parametrize(
    "estimator",
    [gx.GPRegressor, lambda: gx.SparseGPRegressor(n_inducing=4), gx.GPXRegressor],
)
def test_a_feature_whose_variance_overflows_is_refused_naming_it(estimator):
    # Standardised by an infinite scale, the column became zeros and was silently ignored.
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=8), "huge": rng.uniform(1, 2, 8) * 1e200})
    with pytest.raises(ValueError, match=r"column 'huge' has values up to 1.94e\+200"):
        estimator().fit(X, X["a"].to_numpy())


# Inputs that exhaust the machine (issue 27, item 13): each limit is lowered so that a tiny
# file stands for the huge one, and each is refused naming the file, what it holds and the limit.


def _refused(path, fragment):
    with pytest.raises(ValueError, match=fragment) as caught:
        read_table(path)
    assert str(path) in str(caught.value)
    result = CliRunner().invoke(app, ["explain", str(path), "--target", "y", "--out", "o"])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "cannot read" in result.output
    assert "?." not in result.output  # "is it really a table?" ends as it is


def test_gzip_that_expands_past_the_limit_is_refused(tmp_path, monkeypatch):
    import gzip

    monkeypatch.setattr("gpexplain.datasets._tables.MAX_DECOMPRESSED_BYTES", 10_000)
    monkeypatch.setattr("gpexplain.datasets._tables._CHUNK_BYTES", 1024)
    path = tmp_path / "bomb.csv.gz"
    path.write_bytes(gzip.compress(b"x,y\n" + b"1,2\n" * 5000))  # 20 kB from ~100 bytes
    _refused(path, "decompressed, it holds more than 9.77 KiB")
    small = tmp_path / "small.csv.gz"
    small.write_bytes(gzip.compress(b"x,y\n" + b"1,2\n" * 100))
    assert read_table(small).shape == (100, 2)


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_compression_bomb_is_refused_at_its_ratio_before_the_size_limit(tmp_path, monkeypatch,
                                                                       suffix):
    """A 8 MB .gz of 8 GiB took 3 s of decompression to reach the 2 GiB limit (about 1 GB/s);
    its 1000-fold ratio is refused at the floor (256 MiB, lowered here), in 0.3 s."""
    import bz2
    import gzip
    import lzma

    compress = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[suffix]
    monkeypatch.setattr("gpexplain.datasets._tables._COMPRESSION_RATIO_FLOOR", 100_000)
    monkeypatch.setattr("gpexplain.datasets._tables._CHUNK_BYTES", 4096)
    path = tmp_path / f"bomb.csv{suffix}"
    path.write_bytes(compress(b"x,y\n" + b"1,2\n" * 250_000))  # 1 MB, over 200-fold
    _refused(path, "decompressed, it expands more than 200 fold")
    # a table of numbers compresses a few fold and is read whatever its size
    table = tmp_path / f"table.csv{suffix}"
    numbers = np.random.default_rng(0).normal(size=(20_000, 2))
    table.write_bytes(compress(pd.DataFrame(numbers, columns=["x", "y"]).to_csv(
        index=False).encode()))
    assert read_table(table).shape == (20_000, 2)


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_line_longer_than_the_limit_is_refused(tmp_path, monkeypatch, where):
    monkeypatch.setattr("gpexplain.datasets._tables.MAX_LINE_BYTES", 500)
    monkeypatch.setattr("gpexplain.datasets._tables._CHUNK_BYTES", 256)
    lines = ["x,y"] + ["1,2"] * 300
    lines[{"first": 1, "middle": 150, "last": -1}[where]] = "1," + "2" * 600
    path = tmp_path / "long.csv"
    path.write_text("\n".join(lines))
    _refused(path, "a line longer than 500 bytes")
    monkeypatch.setattr("gpexplain.datasets._tables._CHUNK_BYTES", 1 << 20)  # lines inside a chunk
    _refused(path, "a line longer than 500 bytes")


def test_more_columns_than_the_limit_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr("gpexplain.datasets._tables.MAX_COLUMNS", 50)
    path = tmp_path / "wide.csv"
    path.write_text(",".join(f"c{j}" for j in range(60)) + ",y\n" + ",".join(["1"] * 61) + "\n")
    _refused(path, "its first line has 61 fields, more than the 50 columns")
    parquet = tmp_path / "wide.parquet"
    pd.DataFrame(np.ones((2, 61)), columns=[f"c{j}" for j in range(61)]).to_parquet(parquet)
    _refused(parquet, "it has 61 columns, more than the 50")


def test_excel_zip_bomb_is_refused_before_openpyxl(tmp_path, monkeypatch):
    import zipfile

    path = tmp_path / "bomb.xlsx"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/worksheets/sheet1.xml", b"<c/>" * 50_000)  # 200 kB, ~1000-fold
    monkeypatch.setattr("gpexplain.datasets._tables.MAX_EXCEL_BYTES", 100_000)
    _refused(path, "its zip members expand to 195 KiB")
    monkeypatch.setattr("gpexplain.datasets._tables.MAX_EXCEL_BYTES", 1 << 30)
    monkeypatch.setattr("gpexplain.datasets._tables._EXCEL_RATIO_FLOOR", 10_000)
    _refused(path, "100 times the file")
