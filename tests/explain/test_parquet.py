"""Streaming explanations to Parquet (``output_path=``): unambiguous columns, whole files."""

import json

import numpy as np
import pandas as pd
import pytest

import gpexplain as gx
from gpexplain.explain._parquet import write_parquet

pq = pytest.importorskip("pyarrow.parquet")

# "a,b" & "c" and "a" & "b,c" both read cov[a,b,c] when columns are named by feature name.
NAMES = ["a,b", "c", "a", "b,c"]


@pytest.fixture(scope="module")
def posterior():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 4))
    y = X[:, 0] - X[:, 1] * X[:, 2] + X[:, 3]
    return gx.ExactPosterior(X, y, gx.kernels.RBF(np.ones(4), 1.0), 0.1, feature_names=NAMES)


def test_covariance_columns_of_names_with_commas_do_not_collide(posterior, tmp_path):
    Q = pd.DataFrame(np.random.default_rng(1).normal(size=(3, 4)), columns=NAMES)
    expected = gx.integrated_gradients(posterior, Q)
    path = gx.integrated_gradients(posterior, Q, output_path=tmp_path / "ig.parquet")
    table = pd.read_parquet(path)
    covariances = [column for column in table.columns if column.startswith("cov[")]
    assert len(covariances) == len(NAMES) * (len(NAMES) + 1) // 2
    for i, j in zip(*np.triu_indices(len(NAMES)), strict=True):
        np.testing.assert_allclose(table[f"cov[{i},{j}]"], expected.cov[:, i, j], rtol=1e-12,
                                   atol=1e-14)
    for i, name in enumerate(NAMES):
        np.testing.assert_allclose(table[f"mean[{name}]"], expected.mean[:, i], rtol=1e-12)
    metadata = pq.read_schema(path).metadata
    assert json.loads(metadata[b"gpexplain.feature_names"]) == NAMES


def test_a_failed_write_leaves_an_existing_file_as_it_was(tmp_path):
    path = tmp_path / "ig.parquet"
    path.write_bytes(b"the user's earlier results")
    row = np.ones((1, 1))

    def chunks():
        yield row, None, np.ones(1), None, None
        raise FloatingPointError("a later chunk is not finite")

    with pytest.raises(FloatingPointError, match="later chunk"):
        write_parquet(path, chunks(), ["x"], "integrated_gradients")
    assert path.read_bytes() == b"the user's earlier results"
    assert [p.name for p in tmp_path.iterdir()] == ["ig.parquet"]  # no partial file left
