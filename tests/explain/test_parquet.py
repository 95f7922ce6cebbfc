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


# -- several outputs (issue 24) ----------------------------------------------------------------

TRAIN = np.random.default_rng(2).normal(size=(40, 3))
TARGET = np.sin(TRAIN[:, 0]) + TRAIN[:, 1] * TRAIN[:, 2]
TASKS = np.arange(len(TRAIN)) % 2
MIXED = np.where(TASKS == 0, TARGET, -0.5 * TARGET + TRAIN[:, 0])
FEATURES = ["u", "v", "w"]


def _several(kind: str):
    """Two outputs over three features as in tests/test_parallel.py's cluster test."""
    rbf = gx.kernels.RBF(np.array([1.0, 0.7, 1.5]), 1.3)
    B = np.array([[1.0, 0.6], [0.6, 0.8]])
    if kind == "icm":
        return gx.CoregionalizedPosterior(TRAIN, TASKS, MIXED, rbf, B, 0.05,
                                          output_names=["yield", "cost"], feature_names=FEATURES)
    if kind == "lmc":
        return gx.LMCPosterior(TRAIN, TASKS, MIXED,
                               [rbf, gx.kernels.RBF(np.array([0.4, 2.0, 0.9]), 0.5)],
                               [B, np.array([[0.3, -0.2], [-0.2, 0.5]])], 0.05,
                               output_names=["yield", "cost"], feature_names=FEATURES)
    return gx.IndependentOutputs(
        [gx.ExactPosterior(TRAIN, TARGET, rbf, 0.05, feature_names=FEATURES),
         gx.ExactPosterior(TRAIN[:30], -TARGET[:30], gx.kernels.RBF(np.ones(3), 0.9), 0.1,
                           feature_names=FEATURES)],
        output_names=["yield", "cost"])


def _read_several(path):
    """The file back as arrays, from the documented layout alone: mean (n, t, D), joint cov
    at each point (n, t, D, t, D), and (n, t) per-output columns."""
    table = pd.read_parquet(path)
    metadata = pq.read_schema(path).metadata
    outputs = json.loads(metadata[b"gpexplain.output_names"])
    features = json.loads(metadata[b"gpexplain.feature_names"])
    independent = json.loads(metadata[b"gpexplain.independent_outputs"])
    n, t, d = len(table), len(outputs), len(features)
    mean = np.stack([[table[f"mean[{o}/{f}]"] for f in features] for o in outputs])
    cov = np.zeros((n, t * d, t * d))
    for p in range(t * d):
        for q in range(p, t * d):
            column = f"cov[{p},{q}]"
            if independent and p // d != q // d:
                assert column not in table  # zero by the model: left out
                continue
            cov[:, p, q] = cov[:, q, p] = table[column]
    per_output = {name: np.stack([table[f"{name}[{o}]"] for o in outputs], axis=1)
                  for name in ("prediction", "difference_variance", "baseline_prediction")}
    return (table, outputs, features, np.moveaxis(mean, 2, 0),
            cov.reshape(n, t, d, t, d), per_output)


@pytest.mark.parametrize("kind", ["icm", "lmc", "independent"])
def test_several_outputs_stream_to_parquet_and_read_back_whole(kind, tmp_path):
    posterior = _several(kind)
    Q = pd.DataFrame(np.random.default_rng(4).normal(size=(11, 3)), columns=FEATURES)
    expected = gx.integrated_gradients(posterior, Q, chunk_size=4)
    path = gx.integrated_gradients(posterior, Q, chunk_size=4,
                                   output_path=tmp_path / "ig.parquet")
    table, outputs, features, mean, cov, per_output = _read_several(path)
    assert outputs == ["yield", "cost"] and features == FEATURES
    assert list(table["row"]) == list(range(len(Q)))
    assert [c for c in table.columns if c.startswith("mean[")] == [
        f"mean[{o}/{f}]" for o in outputs for f in FEATURES]  # output-major
    np.testing.assert_allclose(mean, expected.mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(cov, expected.cov, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(per_output["prediction"], expected.prediction, rtol=1e-12)
    for k, attribution in enumerate(expected.attributions):
        np.testing.assert_allclose(per_output["difference_variance"][:, k],
                                   attribution.difference_variance, rtol=1e-12)
        np.testing.assert_allclose(per_output["baseline_prediction"][:, k],
                                   attribution.baseline_prediction, rtol=1e-12)
    between = cov[:, 0, :, 1, :]
    assert (np.abs(between).max() == 0.0) == (kind == "independent")


@pytest.mark.parametrize("kind", ["icm", "independent"])
def test_a_failed_multi_output_write_leaves_an_existing_file_as_it_was(kind, tmp_path,
                                                                       monkeypatch):
    from gpexplain.explain import multi_output

    name = "_independent_chunk" if kind == "independent" else "_coregionalized_chunk"
    real, calls = getattr(multi_output, name), []

    def not_finite_in_the_second_chunk(block, context):
        outputs = real(block, context)
        calls.append(len(block))
        return (outputs[0] * (np.nan if len(calls) == 2 else 1.0),) + outputs[1:]

    monkeypatch.setattr(multi_output, name, not_finite_in_the_second_chunk)
    path = tmp_path / "ig.parquet"
    path.write_bytes(b"the user's earlier results")
    with pytest.raises(FloatingPointError, match="non-finite"):
        gx.integrated_gradients(_several(kind), np.zeros((6, 3)), chunk_size=3,
                                output_path=path)
    assert calls == [3, 3]
    assert path.read_bytes() == b"the user's earlier results"
    assert [p.name for p in tmp_path.iterdir()] == ["ig.parquet"]  # no partial file left


def test_mean_columns_two_outputs_would_share_are_refused_before_any_work(tmp_path):
    features = ["c", "b/c", "d"]
    posteriors = [gx.ExactPosterior(TRAIN, TARGET, gx.kernels.RBF(np.ones(3), 1.0), 0.1,
                                    feature_names=features)] * 2
    several = gx.IndependentOutputs(posteriors, output_names=["a/b", "a"])
    with pytest.raises(ValueError, match=r"mean\[a/b/c\].*rename"):
        gx.integrated_gradients(several, np.zeros((2, 3)), output_path=tmp_path / "x.parquet")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(NotImplementedError, match="output_path"):
        gx.integrated_gradients(_several("icm"), np.zeros((2, 3)), return_cov="points",
                                output_path=tmp_path / "x.parquet")
