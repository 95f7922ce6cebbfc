"""The Dask executor: results equal the serial ones (to round-off: the same float64 operations
run on the same blocks), memory per worker bounded by the chunk size, results streamed to Parquet.

Runs on a real ``distributed.LocalCluster`` with two worker processes, shared by the module:
starting it and importing gpexplain in each worker takes 20-40 s on a loaded 2-core machine,
so the tests that use it are marked slow."""

from __future__ import annotations

import logging
import os
import socket
import time
import tracemalloc

import numpy as np
import pandas as pd
import pytest

import gpexplain as gx
from gpexplain.parallel import ClusterError, dask_client, iter_chunks

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as shared_client,
    ):
        yield shared_client


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    posterior = gx.ExactPosterior(X, y, gx.kernels.RBF(np.array([1.0, 0.7, 1.5]), 1.3), 0.05)
    return posterior, rng.normal(size=(53, 3))


def _assert_same(distributed_result, serial):
    for name in ("mean", "cov", "prediction", "difference_variance", "X"):
        a, b = getattr(distributed_result, name), getattr(serial, name)
        assert (a is None) == (b is None), name
        if a is not None:
            # The same float64 operations on the same blocks; only BLAS kernels chosen by the
            # alignment of the unpickled arrays may differ, at round-off (seen: 5e-15 relative).
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.max(np.abs(b)),
                                       err_msg=name)
    assert distributed_result.baseline_prediction == serial.baseline_prediction
    assert distributed_result.feature_names == serial.feature_names
    assert distributed_result.method == serial.method


@pytest.mark.slow
@pytest.mark.parametrize("return_cov", [True, False])
def test_integrated_gradients_on_the_cluster_equal_the_serial_ones(client, problem, return_cov):
    posterior, Q = problem
    serial = gx.integrated_gradients(posterior, Q, chunk_size=6, return_cov=return_cov)
    remote = gx.integrated_gradients(
        posterior, Q, chunk_size=6, return_cov=return_cov, client=client
    )
    _assert_same(remote, serial)


@pytest.mark.slow
def test_gradients_and_mixtures_on_the_cluster_equal_the_serial_ones(client, problem):
    posterior, Q = problem
    _assert_same(
        gx.gradients(posterior, Q, chunk_size=10, client=client),
        gx.gradients(posterior, Q, chunk_size=10),
    )
    rng = np.random.default_rng(3)
    X = posterior.train_inputs
    mixture = gx.MixturePosterior(
        [gx.ExactPosterior(X, rng.normal(size=len(X)), gx.kernels.RBF(np.ones(3), 1.0), 0.1),
         posterior],
        np.array([0.3, 0.7]),
    )
    _assert_same(
        gx.integrated_gradients(mixture, Q, chunk_size=9, client=client),
        gx.integrated_gradients(mixture, Q, chunk_size=9),
    )


@pytest.mark.slow
def test_chunks_come_back_in_order_with_one_in_flight(client):
    X = np.arange(40.0).reshape(20, 2)
    blocks = list(iter_chunks(np.add, 0.5, X, 3, client=client, in_flight=1))
    np.testing.assert_array_equal(np.concatenate(blocks), X + 0.5)
    with pytest.raises(ValueError, match="in_flight"):
        list(iter_chunks(np.add, 0.5, X, 3, client=client, in_flight=0))


def _fails(block, context):
    raise ValueError(f"block of {len(block)} rows refused")


@pytest.mark.slow
def test_an_error_on_a_worker_is_raised_here(client):
    with pytest.raises(ValueError, match="block of 3 rows refused"):
        list(iter_chunks(_fails, None, np.zeros((6, 2)), 3, client=client))


def _peak_worker_bytes(client, posterior, Q) -> int:
    client.run(tracemalloc.start)
    try:
        gx.integrated_gradients(posterior, Q, return_cov=False, chunk_size=200, client=client)
        return max(client.run(lambda: tracemalloc.get_traced_memory()[1]).values())
    finally:
        client.run(tracemalloc.stop)


@pytest.mark.slow
def test_memory_per_worker_does_not_grow_with_the_number_of_points(client):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1000, 3))
    posterior = gx.ExactPosterior(X, np.sin(X[:, 0]), gx.kernels.RBF(np.ones(3), 1.0), 0.1)
    small = _peak_worker_bytes(client, posterior, rng.normal(size=(400, 3)))
    large = _peak_worker_bytes(client, posterior, rng.normal(size=(4000, 3)))
    # The (n_query, n_train) matrix of 4000 points (32 MB) must never be on a worker; one
    # chunk's (200, 1000) slabs and the scattered posterior are.
    assert large < 2 * small, (small, large)


@pytest.mark.slow
@pytest.mark.parametrize("on_cluster", [False, True])
def test_results_stream_to_parquet(client, problem, tmp_path, on_cluster):
    posterior, Q = problem
    names = ["a", "b", "c"]
    frame = pd.DataFrame(Q, columns=names)
    named = gx.ExactPosterior(
        posterior.train_inputs, posterior.train_targets, posterior.kernel, 0.05,
        feature_names=names,
    )
    expected = gx.integrated_gradients(named, frame, chunk_size=8)
    path = gx.integrated_gradients(
        named, frame, chunk_size=8, client=client if on_cluster else None,
        output_path=tmp_path / "ig.parquet",
    )
    table = pd.read_parquet(path)
    assert list(table["row"]) == list(range(len(Q)))
    np.testing.assert_allclose(table["prediction"], expected.prediction, rtol=1e-12)
    np.testing.assert_allclose(table["difference_variance"], expected.difference_variance,
                               rtol=1e-12)
    np.testing.assert_allclose(table["baseline_prediction"], expected.baseline_prediction,
                               rtol=1e-12)
    for i, a in enumerate(names):
        np.testing.assert_allclose(table[f"mean[{a}]"], expected.mean[:, i], rtol=1e-12)
        for j in range(len(names)):
            column = f"cov[{i},{j}]" if i <= j else f"cov[{j},{i}]"
            np.testing.assert_allclose(table[column], expected.cov[:, i, j], rtol=1e-12,
                                       atol=1e-12 * np.max(np.abs(expected.cov)))


def test_bad_client_and_output_path_are_refused(problem, tmp_path):
    posterior, Q = problem
    with pytest.raises(TypeError, match="client must be a dask distributed.Client"):
        gx.integrated_gradients(posterior, Q, client="tcp://127.0.0.1:8786")
    with pytest.raises(ValueError, match=r"output_path must end in \.parquet"):
        gx.integrated_gradients(posterior, Q, output_path=tmp_path / "out.csv")
    with pytest.raises(ValueError, match="folder"):
        gx.integrated_gradients(posterior, Q, output_path=tmp_path / "missing" / "out.parquet")
    with pytest.raises(TypeError, match="output_path must be a str"):
        gx.gradients(posterior, Q, output_path=3)
    mixture = gx.MixturePosterior([posterior, posterior])
    with pytest.raises(ValueError, match="MixturePosterior"):
        gx.integrated_gradients(mixture, Q, output_path=tmp_path / "out.parquet")


@pytest.mark.slow
def test_command_line_explains_on_a_dask_scheduler(client, tmp_path, monkeypatch):

    from typer.testing import CliRunner

    from gpexplain import cli
    from tests.test_cli import one_start

    one_start(monkeypatch)
    rng = np.random.default_rng(2)
    frame = pd.DataFrame(rng.normal(size=(40, 3)), columns=["a", "b", "c"])
    frame["y"] = np.sin(frame["a"]) + frame["b"]
    frame["z"] = frame["a"] * frame["c"] - 0.5 * frame["y"]
    data = tmp_path / "small.csv"
    frame.to_csv(data, index=False)
    runs = {  # one target, and two in an ICM (issue 24: refused with a cluster before)
        "one": ["--target", "y"],
        "icm": ["--target", "y", "--target", "z", "--multi-output", "icm"],
    }
    for run, targets in runs.items():
        tables = {}
        for name, extra in [("serial", []),
                            ("dask", ["--dask-scheduler", client.scheduler.address])]:
            result = CliRunner().invoke(cli.app, [
                "explain", str(data), *targets, "--rows", "0:12", "--no-holdout",
                "--out", str(tmp_path / run / name), *extra,
            ])
            assert result.exit_code == 0, result.output + repr(result.exception)
            tables[name] = pd.read_csv(tmp_path / run / name / "attributions.csv")
        # bitwise: the workers and this process run under the same thread policy
        # (gpexplain._threads), so the same BLAS calls sum in the same order
        pd.testing.assert_frame_equal(tables["dask"], tables["serial"], check_exact=True)


def test_dask_client_arguments():
    with dask_client() as nothing:
        assert nothing is None
    with pytest.raises(ValueError, match="not both"), dask_client("tcp://127.0.0.1:1", 2):
        pass
    with pytest.raises(ValueError, match="must be >= 1"), dask_client(workers=0):
        pass


@pytest.mark.slow
def test_covariance_across_points_on_the_cluster_equals_one_block(client, problem):
    """Issue 25: the blocks of ``point_cov`` computed on the cluster equal one serial block,
    and so does the exact global importance built from them."""
    from gpexplain.explain._points import PointCovariance

    posterior, Q = problem
    remote = gx.integrated_gradients(posterior, Q[:20], return_cov="points", client=client)
    remote.point_cov.block_size = 7
    one = PointCovariance(*remote.point_cov._task[:4], block_size=20).dense()
    np.testing.assert_allclose(remote.point_cov.dense(), one, rtol=0,
                               atol=1e-12 * np.abs(one).max())
    serial = gx.global_importance(posterior, Q[:20], summary="mean_abs", max_joint=1)
    on_cluster = gx.global_importance(posterior, Q[:20], summary="mean_abs", max_joint=1,
                                      client=client)
    np.testing.assert_allclose(on_cluster.std, serial.std, rtol=1e-10)


# -- a cluster that fails (issue 27 item 20) ------------------------------------------------


def _nanny_fails(*args, **kwargs):
    """What distributed raises when a worker process does not start (e.g. out of memory)."""
    try:
        raise RuntimeError("Nanny failed to start worker process")
    except RuntimeError as error:
        raise RuntimeError("Nanny failed to start.") from error


def _refused_address() -> str:
    """A TCP address on this machine with nothing listening."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"tcp://127.0.0.1:{port}"


def test_a_local_cluster_that_does_not_start_says_what_to_do(monkeypatch):
    monkeypatch.setattr(distributed, "LocalCluster", _nanny_fails)
    with pytest.raises(ClusterError) as caught, dask_client(workers=3):
        pass
    message = str(caught.value)
    for part in ("3 worker processes did not start", "Nanny failed to start worker process",
                 "memory", "fewer workers", "without --workers"):
        assert part in message, message
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_an_unreachable_scheduler_fails_in_seconds():
    address = _refused_address()
    start = time.perf_counter()
    with pytest.raises(ClusterError, match="cannot reach the Dask scheduler at") as caught, \
            dask_client(address):
        pass
    # distributed alone retries a refused port for its 30 s connect timeout
    assert time.perf_counter() - start < 5
    assert address in str(caught.value) and "without --dask-scheduler" in str(caught.value)
    assert isinstance(caught.value.__cause__, OSError)


@pytest.fixture
def not_a_scheduler():
    """A TCP address where something else listens: ``"silent"`` accepts and never answers,
    ``"web"`` answers as a web server does (the dashboard's port given for the scheduler's)."""
    import threading

    servers = []

    def listen(answer: bytes | None) -> str:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        servers.append(server)

        def serve():
            accepted = []
            while True:
                try:
                    connection, _ = server.accept()
                except OSError:  # closed at the end of the test
                    return
                accepted.append(connection)
                if answer is not None:
                    connection.sendall(answer)

        threading.Thread(target=serve, daemon=True).start()
        return f"tcp://127.0.0.1:{server.getsockname()[1]}"

    yield lambda kind: listen(None if kind == "silent" else b"HTTP/1.0 400 Bad request\r\n\r\n")
    for server in servers:
        server.close()


@pytest.mark.parametrize("kind", ["silent", "web"])
def test_an_address_that_is_not_a_scheduler_fails_within_the_timeout(not_a_scheduler, kind):
    """distributed's Client held on for 48 s (timeout=10) to minutes, or raised MemoryError
    for the garbled length of a web server's answer."""
    address = not_a_scheduler(kind)
    start = time.perf_counter()
    with pytest.raises(ClusterError, match=f"no Dask scheduler answered at {address} within "
                                           "1 s") as caught, dask_client(address,
                                                                        connect_timeout=1):
        pass
    assert time.perf_counter() - start < 4
    assert "8787 is its dashboard" in str(caught.value)


@pytest.mark.parametrize("option", ["--workers", "--dask-scheduler"])
def test_command_line_refuses_a_cluster_it_cannot_use_before_fitting(option, tmp_path,
                                                                     monkeypatch):
    """One line and exit code 2, before the fit: not a traceback (a cluster that does not
    start), nor 30 s of retries after a fit of minutes (a scheduler that cannot be reached)."""
    from typer.testing import CliRunner

    from gpexplain import cli
    from gpexplain.cli import stages

    monkeypatch.setattr(distributed, "LocalCluster", _nanny_fails)
    monkeypatch.setattr(stages, "fit", lambda *args: pytest.fail("fitted before the cluster"))
    data = tmp_path / "small.csv"
    frame = pd.DataFrame(np.random.default_rng(3).normal(size=(20, 3)), columns=list("abc"))
    frame.assign(y=frame["a"]).to_csv(data, index=False)
    value = "2" if option == "--workers" else _refused_address()
    result = CliRunner().invoke(cli.app, ["explain", str(data), "--target", "y", "--out",
                                          str(tmp_path / "out"), option, value])
    assert result.exit_code == 2, result.output + repr(result.exception)
    [line] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert "Traceback" not in result.output
    expected = ("2 worker processes did not start" if option == "--workers"
                else f"cannot reach the Dask scheduler at {value}")
    assert expected in line, line


def _dies_with_rows_4_and_5(block, context):
    """Kills the worker process that computes the block holding row 4 (of ``_rows``)."""
    if block[0, 0] == 8:
        os._exit(1)
    return (block,)


def _closes_its_worker_with_rows_4_and_5(block, context):
    """Closes the (in-process) worker that computes the block holding row 4, and waits for
    it to go, so that the block's result never comes back."""
    if block[0, 0] == 8:
        _close_this_worker()
    return (block,)


def test_a_worker_lost_mid_run_names_the_rows_lost_in_process():
    """The fast form of the test below: an in-process worker that goes away with a block
    (and the only copy of the scattered context) was ``FutureCancelledError: ... already
    forgotten``."""
    rows = np.arange(12.0).reshape(6, 2)
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                 dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
        pytest.raises(ClusterError) as caught,
    ):
        list(iter_chunks(_closes_its_worker_with_rows_4_and_5, None, rows, 2, client=client,
                         in_flight=1))
    message = str(caught.value)
    for part in ("lost block 3 of 3", "rows 4 to 5 of the 6 query points",
                 "2 block(s) before it were done", "fewer workers", "without a cluster"):
        assert part in message, message
    assert isinstance(caught.value.__cause__, distributed.client.FutureCancelledError)


def _close_this_worker():
    """Close the (in-process) worker running the caller's task and wait for it to go, so
    that the task's result never comes back."""
    worker = distributed.get_worker()
    worker.loop.add_callback(worker.close)
    deadline = time.monotonic() + 10
    while worker.status.name not in ("closing", "closed") and time.monotonic() < deadline:
        time.sleep(0.01)


# The blocks the in-process workers ran, in this process (a task's function is pickled by
# reference, so it must be a module-level function to share this list).
_BLOCKS_RUN = []
_RUN_BLOCK = gx.parallel._run_block


def _third_block_loses_its_worker(function, block, context, training_rows):
    """``parallel._run_block``, closing its worker on the third block it is given."""
    _BLOCKS_RUN.append(len(block))
    if len(_BLOCKS_RUN) == 3:
        time.sleep(0.5)  # the client fetches the second block's result first
        _close_this_worker()
    return _RUN_BLOCK(function, block, context, training_rows)


class _Recorded(logging.Handler):
    """Keeps the records distributed's loggers emit."""

    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.mark.parametrize("option", ["--workers", "--dask-scheduler"])
def test_command_line_words_a_lost_block_in_its_own_terms(option, tmp_path, monkeypatch):
    """Issue 27 item 20: from the command line a lost worker's message named the Python
    argument ``chunk_size=`` and the rows' positions within the ``--rows`` selection (here 4
    to 5 for --rows 12,13), after distributed's own ERROR lines on stderr. Now: the
    command's options, the rows as ``--rows`` takes them (and the file's data rows, which
    ``--missing drop`` renumbered), and nothing from distributed's loggers. The cluster is
    in-process (one worker, closed with the third block of two rows)."""
    from typer.testing import CliRunner

    from gpexplain import cli, parallel
    from gpexplain.explain import _driver

    def in_process(*args, **kwargs):
        return LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                            dashboard_address=None)

    LocalCluster = distributed.LocalCluster
    scheduler = None
    if option == "--workers":
        monkeypatch.setattr(distributed, "LocalCluster", in_process)
    else:
        scheduler = in_process()
        monkeypatch.setattr(parallel, "CONNECT_TIMEOUT_SECONDS", 30.0)
    _BLOCKS_RUN.clear()
    monkeypatch.setattr(parallel, "_run_block", _third_block_loses_its_worker)
    monkeypatch.setattr(_driver, "default_chunk_size", lambda *args, **kwargs: 2)
    data = tmp_path / "small.csv"
    frame = pd.DataFrame(np.random.default_rng(3).normal(size=(20, 3)), columns=list("abc"))
    frame.loc[1, "b"] = np.nan  # dropped: the data rows after it are one past their position
    frame.assign(y=frame["a"]).to_csv(data, index=False)
    recorded = _Recorded()
    watched = [logging.getLogger(name) for name in ("distributed", "distributed.client")]
    for logger in watched:
        logger.addHandler(recorded)
    try:
        value = "2" if option == "--workers" else scheduler.scheduler_address
        result = CliRunner().invoke(cli.app, [
            "explain", str(data), "--target", "y", "--out", str(tmp_path / "out"),
            "--missing", "drop", "--rows", "3,5,8,9,12,13", "--no-holdout", option, value])
    finally:
        for logger in watched:
            logger.removeHandler(recorded)
        if scheduler is not None:
            scheduler.close()
    assert result.exit_code == 2, result.output + repr(result.exception)
    [line] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    for part in ("lost block 3 of 3 (--rows 12,13 (data rows 13,14))",
                 "2 block(s) before it were done",
                 "fewer --workers (more memory each), or without --workers"
                 if option == "--workers" else
                 f"more memory per worker on the cluster at {value}, or without "
                 "--dask-scheduler"):
        assert part in line, line
    assert "chunk_size" not in line
    assert [str(r.getMessage()) for r in recorded.records] == []


@pytest.mark.slow
@pytest.mark.parametrize("allowed_failures", [0, 3])
def test_a_worker_that_dies_names_the_rows_lost(allowed_failures):
    """Issue 27 item 20: a worker that dies mid-run (here os._exit; in practice the memory
    limit) was a bare ``KilledWorker`` (when distributed gives up on the task) or
    ``FutureCancelledError: ... already forgotten`` (the default: the model's copy was lost
    with the worker). One worker process: about 5-10 s to start."""
    rows = np.arange(12.0).reshape(6, 2)
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures}),
        distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                 dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
        pytest.raises(ClusterError) as caught,
    ):
        list(iter_chunks(_dies_with_rows_4_and_5, None, rows, 2, client=client, in_flight=1))
    message = str(caught.value)
    for part in ("lost block 3 of 3", "rows 4 to 5 of the 6 query points",
                 "2 block(s) before it were done", "fewer workers", "without a cluster"):
        assert part in message, message
    lost = (distributed.KilledWorker, distributed.client.FutureCancelledError)
    assert isinstance(caught.value.__cause__, lost)


@pytest.mark.slow
def test_multi_output_explanations_on_the_cluster_equal_the_serial_ones(client, problem,
                                                                        tmp_path):
    """Issue 24: client= with several outputs (refused before). An ICM's and an LMC's chunks
    hold every output and the covariance between outputs; independent outputs run output by
    output (streamed to Parquet: every output per block)."""
    posterior, Q = problem
    X, y = posterior.train_inputs, posterior.train_targets
    tasks = np.arange(len(X)) % 2
    icm = gx.CoregionalizedPosterior(X, tasks, np.where(tasks == 0, y, -0.5 * y + X[:, 0]),
                                     gx.kernels.RBF(np.array([1.0, 0.7, 1.5]), 1.3),
                                     np.array([[1.0, 0.6], [0.6, 0.8]]), 0.05)
    lmc = gx.LMCPosterior(X, tasks, icm.train_targets,
                          [gx.kernels.RBF(np.array([1.0, 0.7, 1.5]), 1.3),
                           gx.kernels.RBF(np.array([0.4, 2.0, 0.9]), 0.5)],
                          [np.array([[1.0, 0.6], [0.6, 0.8]]),
                           np.array([[0.3, -0.2], [-0.2, 0.5]])], 0.05)
    independent = gx.IndependentOutputs(
        [posterior, gx.ExactPosterior(X, -y, gx.kernels.RBF(np.ones(3), 0.9), 0.1)])
    for several in (icm, lmc, independent):
        serial = gx.integrated_gradients(several, Q[:9], chunk_size=4, return_cov="points")
        remote = gx.integrated_gradients(several, Q[:9], chunk_size=4, return_cov="points",
                                         client=client)
        for one, other in zip(remote.attributions, serial.attributions, strict=True):
            _assert_same(one, other)
            np.testing.assert_allclose(one.point_cov.dense(), other.point_cov.dense(),
                                       rtol=1e-12, atol=1e-12)
        if several is not independent:
            np.testing.assert_allclose(remote.cov, serial.cov, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(remote.point_cov_dense(), serial.point_cov_dense(),
                                       rtol=1e-12, atol=1e-14)
        path = gx.integrated_gradients(several, Q[:9], chunk_size=4, client=client,
                                       output_path=tmp_path / "ig.parquet")
        table = pd.read_parquet(path)
        names = serial.output_names
        np.testing.assert_allclose(np.stack([table[f"prediction[{o}]"] for o in names], 1),
                                   serial.prediction, rtol=1e-12)
        means = [table[f"mean[{o}/{f}]"] for o in names for f in serial.feature_names]
        np.testing.assert_allclose(np.stack(means, 1), serial.mean.reshape(9, -1),
                                   rtol=1e-12, atol=1e-14)
