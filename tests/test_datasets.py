"""Bundled data sets (``list_datasets``, ``load_dataset``) and ``read_table``."""

from __future__ import annotations

import gzip
import hashlib
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpexplain.datasets import list_datasets, load_dataset, read_table

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
BUNDLED = {
    "winequality-red.csv": SHARED_DATA / "wine_quality" / "winequality-red.csv",
    "real_estate_valuation.csv": SHARED_DATA / "taipei_real_estate" / "real_estate_valuation.csv",
}
NAMES = ["diabetes", "wine-quality-red", "taipei-real-estate"]


def _package_file(name: str):
    return resources.files("gpexplain.datasets").joinpath("data", name)


# -- bundled data --------------------------------------------------------------------------
def test_list_datasets_table():
    table = list_datasets()
    assert list(table.columns) == ["name", "rows", "features", "target", "source", "licence"]
    assert table["name"].tolist() == NAMES
    assert table.set_index("name").loc["wine-quality-red", "licence"] == "CC BY 4.0"
    assert "10.24432/C5J30W" in table.set_index("name").loc["taipei-real-estate", "source"]


@pytest.mark.parametrize("name", NAMES)
def test_load_dataset_matches_its_listing(name):
    X, y = load_dataset(name)
    listing = list_datasets().set_index("name").loc[name]
    assert X.shape == (listing["rows"], listing["features"])
    assert y.shape == (listing["rows"],) and y.name == listing["target"]
    assert listing["target"] not in X.columns
    assert all(pd.api.types.is_numeric_dtype(X[c]) for c in X.columns)
    assert np.isfinite(X.to_numpy(dtype=float)).all() and np.isfinite(y.to_numpy(float)).all()
    assert isinstance(X.index, pd.RangeIndex) and X.index.equals(y.index)


def test_taipei_drops_the_index_column():
    X, y = load_dataset("taipei-real-estate")
    assert "No" not in X.columns
    assert X.columns[0] == "X1 transaction date"
    assert y.iloc[0] == pytest.approx(37.9)


def test_wine_values():
    X, y = load_dataset("wine-quality-red")
    assert X.columns[0] == "fixed acidity" and X.columns[-1] == "alcohol"
    assert X.iloc[0, 0] == pytest.approx(7.4)
    assert set(np.unique(y)) <= set(range(11))


def test_diabetes_is_the_scaled_scikit_learn_version():
    X, y = load_dataset("diabetes")
    np.testing.assert_allclose(X.mean().to_numpy(), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(X.to_numpy(), axis=0), 1.0, rtol=1e-6)
    assert y.name == "target"


def test_load_dataset_name_is_forgiving_about_case_and_underscores():
    X, _ = load_dataset(" Taipei_Real_Estate ")
    assert X.shape == (414, 6)


def test_unknown_dataset_lists_the_available_names():
    with pytest.raises(ValueError, match="unknown data set 'iris'") as error:
        load_dataset("iris")
    for name in NAMES:
        assert name in str(error.value)
    with pytest.raises(TypeError, match="string"):
        load_dataset(3)


@pytest.mark.parametrize("filename", sorted(BUNDLED))
def test_bundled_files_are_unchanged_copies(filename):
    provenance = _package_file("PROVENANCE.md").read_text(encoding="utf-8")
    digest = hashlib.sha256(_package_file(filename).read_bytes()).hexdigest()
    assert digest in provenance
    assert "CC BY 4.0" in provenance
    shared = BUNDLED[filename]
    if shared.is_file():
        assert shared.read_bytes() == _package_file(filename).read_bytes()


# -- read_table ----------------------------------------------------------------------------
FRAME = pd.DataFrame({"a b": [1.5, 2.0, -3.25], "c": [1, 2, 3], "y": [0.1, 0.2, 0.3]})


@pytest.mark.parametrize("sep", [",", ";", "\t", "|"])
def test_read_table_detects_the_delimiter(tmp_path, sep):
    path = tmp_path / "table.csv"
    FRAME.to_csv(path, sep=sep, index=False)
    pd.testing.assert_frame_equal(read_table(path), FRAME)


def test_read_table_quoted_semicolon_header_like_uci(tmp_path):
    path = tmp_path / "wine.csv"
    path.write_text('"fixed acidity";"pH";"quality"\n7.4;3.51;5\n7.8;3.2;5\n')
    table = read_table(str(path))
    assert list(table.columns) == ["fixed acidity", "pH", "quality"]
    assert table.shape == (2, 3) and table["pH"].dtype == np.float64


def test_read_table_on_the_bundled_wine_file():
    with resources.as_file(_package_file("winequality-red.csv")) as path:
        table = read_table(path)
    assert table.shape == (1599, 12) and table.columns[-1] == "quality"


@pytest.mark.parametrize("suffix", [".parquet", ".pq", ".PARQUET"])
def test_read_table_parquet(tmp_path, suffix):
    path = tmp_path / f"table{suffix}"
    FRAME.to_parquet(path)
    pd.testing.assert_frame_equal(read_table(path), FRAME)


def test_read_table_single_column_gzip_bom_and_latin1(tmp_path):
    single = tmp_path / "single.csv"
    single.write_text("y\n1\n2\n")
    assert read_table(single)["y"].tolist() == [1, 2]
    compressed = tmp_path / "table.csv.gz"
    with gzip.open(compressed, "wt") as handle:
        FRAME.to_csv(handle, sep=";", index=False)
    pd.testing.assert_frame_equal(read_table(compressed), FRAME)
    bom = tmp_path / "bom.csv"
    bom.write_bytes("\ufeffa;b\n1;2\n".encode())
    assert list(read_table(bom).columns) == ["a", "b"]
    latin = tmp_path / "latin.csv"
    latin.write_bytes("température,y\n1,2\n".encode("latin-1"))
    assert list(read_table(latin).columns) == ["température", "y"]


def test_read_table_header_only_gives_an_empty_frame(tmp_path):
    path = tmp_path / "header.csv"
    path.write_text("a,b,y\n")
    table = read_table(path)
    assert list(table.columns) == ["a", "b", "y"] and len(table) == 0


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("missing.csv", None, "no such file"),
        ("empty.csv", b"", "empty"),
        ("blank.csv", b"\n \n\n", "empty"),
        ("binary.csv", b"PK\x03\x04\x00\x00binary", "binary"),
        ("broken.parquet", b"not parquet at all", "cannot read"),
        ("ragged.csv", b"a,b\n1,2\n3,4,5,6\n", "cannot read"),
    ],
)
def test_read_table_errors_name_the_path(tmp_path, name, content, fragment):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ValueError, match=fragment) as error:
        read_table(path)
    message = str(error.value)
    assert str(path) in message and "\n" not in message


def test_read_table_rejects_directories_and_non_paths(tmp_path):
    with pytest.raises(ValueError, match="not a regular file"):
        read_table(tmp_path)
    with pytest.raises(TypeError, match="path"):
        read_table(42)
