"""Real regression data sets that ship with gpexplain (or with scikit-learn)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import pandas as pd

__all__ = ["list_datasets", "load_dataset"]


def _read_package_csv(filename: str, sep: str) -> pd.DataFrame:
    """Read a CSV file shipped in ``gpexplain/datasets/data``."""
    with resources.files("gpexplain.datasets").joinpath("data", filename).open("rb") as handle:
        return pd.read_csv(handle, sep=sep)


def _load_diabetes() -> tuple[pd.DataFrame, pd.Series]:
    from sklearn.datasets import load_diabetes

    bunch = load_diabetes(as_frame=True)
    return bunch.data, bunch.target.rename("target")


def _load_wine_red() -> tuple[pd.DataFrame, pd.Series]:
    frame = _read_package_csv("winequality-red.csv", sep=";")
    return frame.drop(columns="quality"), frame["quality"]


def _load_taipei() -> tuple[pd.DataFrame, pd.Series]:
    frame = _read_package_csv("real_estate_valuation.csv", sep=",")
    target = "Y house price of unit area"
    return frame.drop(columns=["No", target]), frame[target]


@dataclass(frozen=True)
class _Dataset:
    name: str
    rows: int
    features: int
    target: str
    source: str
    licence: str
    loader: Callable[[], tuple[pd.DataFrame, pd.Series]]


_UCI_LICENCE = "CC BY 4.0"
_DATASETS = {
    entry.name: entry
    for entry in (
        _Dataset(
            "diabetes",
            442,
            10,
            "target",
            "scikit-learn load_diabetes, scaled features (Efron et al. 2004)",
            "BSD-3-Clause (scikit-learn)",
            _load_diabetes,
        ),
        _Dataset(
            "wine-quality-red",
            1599,
            11,
            "quality",
            "UCI, Cortez et al. 2009, doi:10.24432/C56S3T",
            _UCI_LICENCE,
            _load_wine_red,
        ),
        _Dataset(
            "taipei-real-estate",
            414,
            6,
            "Y house price of unit area",
            "UCI, Yeh and Hsu 2018, doi:10.24432/C5J30W",
            _UCI_LICENCE,
            _load_taipei,
        ),
    )
}


def list_datasets() -> pd.DataFrame:
    """Table of the bundled data sets.

    Returns
    -------
    pandas.DataFrame
        One row per data set with columns ``name``, ``rows``, ``features`` (number of feature
        columns returned by ``load_dataset``, i.e. without target and index columns),
        ``target`` (target column name), ``source`` (origin and citation) and ``licence``.
    """
    return pd.DataFrame(
        [
            {
                "name": d.name,
                "rows": d.rows,
                "features": d.features,
                "target": d.target,
                "source": d.source,
                "licence": d.licence,
            }
            for d in _DATASETS.values()
        ]
    )


def load_dataset(name: str) -> tuple[pd.DataFrame, pd.Series]:
    """Load a bundled regression data set.

    Parameters
    ----------
    name : {"diabetes", "wine-quality-red", "taipei-real-estate"}
        Case and ``_``/``-`` are not significant. ``list_datasets()`` describes each set.

        * ``"diabetes"``: 442 x 10, scikit-learn's ``load_diabetes(as_frame=True)``, i.e.
          the *scaled* version scikit-learn ships (each feature mean-centred and scaled to
          unit Euclidean norm); target ``target``, disease progression after one year.
        * ``"wine-quality-red"``: 1599 x 11, UCI Wine Quality (red); target ``quality``.
        * ``"taipei-real-estate"``: 414 x 6, UCI Real estate valuation; target
          ``Y house price of unit area``; the index column ``No`` is dropped.

    Returns
    -------
    X : pandas.DataFrame of shape (n_rows, n_features)
        Numeric features, in the units of the source.
    y : pandas.Series of shape (n_rows,)
        Target, named after its column.

    Raises
    ------
    TypeError
        ``name`` is not a string.
    ValueError
        Unknown name (the message lists the available names).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}.")
    key = name.strip().lower().replace("_", "-")
    if key not in _DATASETS:
        raise ValueError(
            f"unknown data set {name!r}; available: {', '.join(_DATASETS)}."
        )
    X, y = _DATASETS[key].loader()
    return X.reset_index(drop=True), y.reset_index(drop=True)
