"""Execution layer: chunks of query points, locally or on a Dask ``distributed`` cluster.

Explanations of ``n_points`` queries against ``n_train`` training points build intermediate
arrays of size ``n_points * n_train * n_features``; chunking over points caps them. The same
chunks can run on a Dask cluster (``iter_chunks(..., client=...)``): the shared, read-only
context (a posterior and what the explanation needs of it) is scattered to every worker once,
blocks of points are submitted with at most ``in_flight`` of them running or waiting to be
consumed, and the outputs come back in order. Memory per worker is then the context plus
``in_flight`` chunk working sets, whatever the number of points; memory on the client is the
outputs it keeps (none, when a consumer streams them to disk).

A cluster that fails (it will not start, its scheduler cannot be reached, a worker dies with a
block of points or the scheduler goes away mid-run) raises ``ClusterError``, which names what
failed (the number of workers asked; the rows whose results were lost) and what to do, with
distributed's own exception as its ``__cause__``. Errors raised by the computation itself
reach the caller as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

import numpy as np

from gpexplain._threads import native_threads

__all__ = [
    "ClusterError",
    "LostBlock",
    "check_client",
    "concatenate_chunks",
    "dask_client",
    "default_chunk_size",
    "iter_chunks",
    "map_chunks",
]

_MEMORY_BUDGET_BYTES = 256 * 2**20
CONNECT_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class LostBlock:
    """What ``ClusterError`` knows of a block of points lost mid-run, for callers that word
    it in their own terms (the command line names its ``--rows`` and options).

    Attributes
    ----------
    block, n_blocks : int
        The block (0-based) and how many there were.
    done : int
        Blocks before it whose results had come back.
    points : range
        Positions among the query points whose results the block held.
    n_points : int
        Query points in all.
    held : str
        What the block held of those points, a noun phrase ending in " of " (e.g.
        "the covariance with the others of "), or "" for their results.
    reason : str
        distributed's exception and its causes, one line.
    """

    block: int
    n_blocks: int
    done: int
    points: range
    n_points: int
    held: str
    reason: str

    def message(self, rows: str, remedies: str) -> str:
        """The error's text, with the points worded as ``rows`` and what to rerun with as
        ``remedies`` (the one wording of a lost block; callers choose the terms)."""
        return (
            f"the Dask cluster lost block {self.block + 1} of {self.n_blocks} ({self.held}"
            f"{rows}) before its results came back ({self.reason}); {self.done} block(s) "
            f"before it were done. A worker that dies is often out of memory: rerun with "
            f"{remedies}"
        )


class ClusterError(RuntimeError):
    """The Dask cluster failed: it would not start, its scheduler could not be reached, or a
    worker (or the scheduler) was lost mid-run. The message says what failed and what to do;
    ``__cause__`` is distributed's own exception.

    Attributes
    ----------
    lost : LostBlock or None
        The block of points lost mid-run, when that is what failed.
    """

    def __init__(self, message: str, lost: LostBlock | None = None):
        super().__init__(message)
        self.lost = lost


_ARRAYS_PER_ELEMENT = 8  # float64 arrays of size n_train * n_features alive per point


def default_chunk_size(n_train: int, n_features: int, copies_per_point: int = 1) -> int:
    """Points per chunk so that the per-chunk working set stays near 256 MiB.

    ``copies_per_point`` counts how many (n_train, n_features) slabs one point needs, e.g.
    the number of quadrature nodes along its path.
    """
    per_point = (
        8 * _ARRAYS_PER_ELEMENT * max(n_train, 1) * max(n_features, 1) * max(copies_per_point, 1)
    )
    return max(1, _MEMORY_BUDGET_BYTES // per_point)


def check_client(client):
    """``client`` if it is a ``distributed.Client`` (or None).

    Raises
    ------
    TypeError
        Anything else, or a client given without Dask installed (``pip install
        'gpexplain[dask]'``).
    """
    if client is None:
        return None
    try:
        from distributed import Client
    except ImportError as error:  # pragma: no cover - the dask extra is installed by make
        raise TypeError(
            "client= needs Dask: pip install 'gpexplain[dask]' and pass a distributed.Client."
        ) from error
    if not isinstance(client, Client):
        raise TypeError(
            f"client must be a dask distributed.Client (e.g. Client(LocalCluster()) or "
            f"Client('tcp://scheduler:8786')) or None, got {type(client).__name__}."
        )
    return client


def concatenate_chunks(parts: Iterable[tuple]) -> tuple:
    """Concatenate per-chunk output tuples column by column (a column of None stays None)."""
    return tuple(
        None if column[0] is None else np.concatenate(column, axis=0)
        for column in zip(*parts, strict=True)
    )


def map_chunks(
    function: Callable[[np.ndarray], tuple], X: np.ndarray, chunk_size: int
) -> tuple:
    """Apply ``function`` to consecutive row blocks of X and concatenate each output.

    Parameters
    ----------
    function : callable
        Takes an (m, n_features) block and returns a tuple of arrays (or None) whose first axis
        has length m.
    X : ndarray of shape (n_points, n_features)
    chunk_size : int
        Rows per block (>= 1).

    Returns
    -------
    tuple of ndarray or None, one per output of ``function``.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size}.")
    return concatenate_chunks(
        function(X[start : start + chunk_size]) for start in range(0, len(X), chunk_size)
    )


def iter_chunks(
    function: Callable[[np.ndarray, object], tuple],
    context,
    X: np.ndarray,
    chunk_size: int,
    *,
    client=None,
    in_flight: int | None = None,
    training_rows: int = 0,
    points: Callable[[int, int], range] | None = None,
    held: str = "",
) -> Iterator[tuple]:
    """``function(block, context)`` for consecutive row blocks of X, yielded in order.

    Parameters
    ----------
    function : callable(block, context) -> tuple
        A module-level function (Dask pickles it by reference).
    context : object
        Read-only data every block needs (e.g. a posterior); on a cluster, scattered to every
        worker once.
    X : ndarray of shape (n_points, n_features)
    chunk_size : int
        Rows per block (>= 1).
    client : distributed.Client, optional
        Run the blocks on this Dask cluster; None runs them here, one after the other.
    in_flight : int, optional
        Most blocks submitted but not yet yielded (cluster only; default twice the cluster's
        worker threads). Bounds the memory of workers and client independently of n_points.
    training_rows : int
        Rows of the posterior the blocks are computed against: each block runs with the
        native thread count ``gpexplain._threads.thread_count`` gives for it, here and on
        the workers alike.
    points : callable(start, stop) -> range, optional
        The query points whose results rows ``start:stop`` of X hold, for the error that
        names what a lost worker took with it (default: X's rows are the query points).
    held : str
        What the blocks hold of those points, for that error (``LostBlock.held``).

    Yields
    ------
    tuple : ``function``'s output for each block, in the order of the rows.

    Raises
    ------
    ValueError
        ``chunk_size`` or ``in_flight`` < 1.
    TypeError
        ``client`` is not a ``distributed.Client``.
    ClusterError
        The cluster lost a worker (or the scheduler) before a block's results came back, or
        the context could not be sent to the workers: names the block's rows and how to rerun.
    Exception
        Whatever ``function`` raises on a worker, re-raised here.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size}.")
    starts = range(0, len(X), chunk_size)
    if check_client(client) is None:
        for start in starts:
            yield _run_block(function, X[start : start + chunk_size], context, training_rows)
        return
    if points is None:
        def points(start, stop):
            return range(start, stop)
    yield from _cluster_chunks(client, function, context, X, chunk_size, starts, in_flight,
                               training_rows, points, held)


def _run_block(function, block, context, training_rows):
    """``function(block, context)`` under the library's native thread policy."""
    with native_threads(training_rows):
        return function(block, context)


def _cluster_failures() -> tuple[type[BaseException], ...]:
    """distributed's exceptions for a lost worker, scheduler or connection (not the errors of
    the computation, which reach the caller as they are)."""
    from distributed import KilledWorker
    from distributed.client import FutureCancelledError
    from distributed.comm import CommClosedError

    return KilledWorker, FutureCancelledError, CommClosedError


def _cluster_chunks(client, function, context, X, chunk_size, starts, in_flight,
                    training_rows, points, held):
    from distributed import as_completed

    if in_flight is None:
        in_flight = 2 * max(1, sum(client.nthreads().values()))
    if isinstance(in_flight, bool) or not isinstance(in_flight, int | np.integer) or in_flight < 1:
        raise ValueError(f"in_flight must be a positive integer or None, got {in_flight!r}.")
    failures = _cluster_failures()
    try:
        [shared] = client.scatter([context], broadcast=True)
    except (*failures, OSError, TimeoutError) as error:
        raise ClusterError(
            f"could not send the model to the Dask workers ({_reason(error)}); check that the "
            "cluster is running and has memory for one copy of the model per worker, or run "
            "without a cluster (serially in this process)"
        ) from error
    index_of, results = {}, {}
    pending = as_completed()
    submitted = consumed = 0
    try:
        while consumed < len(starts):
            # Submit only while fewer than in_flight blocks are out, so a slow block cannot let
            # finished ones pile up on the workers or here.
            while submitted < len(starts) and submitted - consumed < in_flight:
                start = starts[submitted]
                future = client.submit(
                    _run_block, function, X[start : start + chunk_size], shared,
                    training_rows, pure=False,
                )
                index_of[future.key] = submitted
                pending.add(future)
                submitted += 1
            future = next(pending)
            block = index_of.pop(future.key)
            try:
                results[block] = future.result()
            except failures as error:
                start = starts[block]
                lost = LostBlock(block, len(starts), consumed,
                                 points(start, min(start + chunk_size, len(X))),
                                 points(0, len(X)).stop, held, _reason(error))
                raise ClusterError(lost.message(
                    f"rows {lost.points.start} to {lost.points.stop - 1} of the "
                    f"{lost.n_points} query points (0-based)",
                    "fewer workers (more memory each), smaller chunks (chunk_size=), or "
                    "without a cluster (serially in this process)"), lost) from error
            future.release()
            while consumed in results:
                yield results.pop(consumed)
                consumed += 1
    finally:
        client.cancel(list(pending.futures) + [shared])


def _reason(error: BaseException) -> str:
    """``error`` and the chain of its causes as one line: "Type: message <- Type: message"."""
    parts, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        text = " ".join(str(error).split())
        parts.append(f"{type(error).__name__}: {text}" if text else type(error).__name__)
        error = error.__cause__ or error.__context__
    return " <- ".join(parts).rstrip(".")


@contextmanager
def dask_client(scheduler: str | None = None, workers: int | None = None,
                connect_timeout: float = CONNECT_TIMEOUT_SECONDS):
    """A ``distributed.Client`` for the duration of a ``with`` block (None when neither given).

    Parameters
    ----------
    scheduler : str, optional
        Address of a running Dask scheduler, e.g. ``"tcp://10.0.0.1:8786"``.
    workers : int, optional
        Start a ``LocalCluster`` of this many worker processes (one thread each) instead;
        closed at the end of the block.
    connect_timeout : float
        Seconds to wait for the scheduler (default 10; distributed's own default is 30). A
        TCP address whose port refuses connections fails at once; one where something other
        than a Dask scheduler listens fails within this time.

    Raises
    ------
    ValueError
        Both given, or ``workers`` < 1.
    TypeError
        Dask is not installed (``pip install 'gpexplain[dask]'``).
    ClusterError
        The scheduler cannot be reached within ``connect_timeout``, or the local cluster does
        not start (e.g. too little memory for its worker processes); the message names the
        address or the number of workers and what to do.
    """
    if scheduler is not None and workers is not None:
        raise ValueError("give a Dask scheduler address or a number of local workers, not both.")
    if scheduler is None and workers is None:
        yield None
        return
    if workers is not None and (isinstance(workers, bool) or workers < 1):
        raise ValueError(f"the number of local Dask workers must be >= 1, got {workers!r}.")
    try:
        from distributed import Client, LocalCluster
    except ImportError as error:  # pragma: no cover - the dask extra is installed by make
        raise TypeError("Dask is not installed: pip install 'gpexplain[dask]'.") from error
    with ExitStack() as stack:
        if scheduler is not None:
            client = stack.enter_context(_connect(Client, scheduler, connect_timeout))
        else:
            try:
                cluster = stack.enter_context(LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True,
                    dashboard_address=None,
                ))
                client = stack.enter_context(Client(cluster))
            except (RuntimeError, OSError, TimeoutError, MemoryError) as error:
                # distributed raises RuntimeError("Nanny failed to start.") (or "Cluster
                # failed to start: ...") from the worker's own failure
                plural = "es" if workers != 1 else ""
                raise ClusterError(
                    f"the local Dask cluster of {workers} worker process{plural} did not start "
                    f"({_reason(error)}); each worker process needs memory for the library and "
                    "a copy of the model (a few hundred MB): check the free memory, ask for "
                    "fewer workers, or run serially in this process without --workers"
                ) from error
        yield client


def _connect(Client, scheduler: str, timeout: float):
    """``Client(scheduler)``, or a ClusterError within about ``timeout`` seconds that names the
    address. A TCP port that refuses connections is reported at once (distributed retries it
    until its timeout), and the address is asked who it is, within ``timeout`` in all, before
    the client connects: something else listening there (the dashboard's port 8787 given for
    the scheduler's 8786, a web server) held ``Client`` for 48 s to minutes with
    ``timeout=10``, and answered with a MemoryError for a garbled message length."""
    hint = ("check the address (a scheduler listens on port 8786 by default; 8787 is its "
            "dashboard) and that a scheduler runs there (dask scheduler), or run without "
            "--dask-scheduler (serially in this process)")
    address = scheduler if "://" in scheduler else f"tcp://{scheduler}"
    parts = urlsplit(address)
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number: distributed names it
        host = port = None
    if parts.scheme == "tcp" and host and port:
        import socket

        try:
            socket.create_connection((host, port), timeout=timeout).close()
        except OSError as error:
            raise ClusterError(
                f"cannot reach the Dask scheduler at {scheduler} ({_reason(error)}); {hint}"
            ) from error
        # tls:// and others need the security settings Client takes from dask's config
        _check_is_scheduler(address, scheduler, timeout, hint)
    try:
        return Client(scheduler, timeout=timeout)
    except (OSError, TimeoutError) as error:
        raise ClusterError(
            f"cannot reach the Dask scheduler at {scheduler} within {timeout:g} s "
            f"({_reason(error)}); {hint}"
        ) from error


def _check_is_scheduler(address: str, scheduler: str, timeout: float, hint: str) -> None:
    """Ask ``address`` for its identity (distributed's ``identity`` operation), all within
    ``timeout`` seconds, on an event loop of its own thread (so a caller's running loop, e.g.
    Jupyter's, is left alone); ClusterError unless a Dask scheduler answers."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures import TimeoutError as FutureTimeout

    from distributed.comm import connect

    async def identity():
        comm = await connect(address, timeout=timeout)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    async def bounded():
        return await asyncio.wait_for(identity(), timeout)

    pool = ThreadPoolExecutor(1, thread_name_prefix="gpexplain-dask-probe")
    try:
        answer = pool.submit(asyncio.run, bounded()).result(timeout + 5)
    # A garbled reply decodes as a frame of absurd length: MemoryError, not an exhausted machine.
    except (OSError, TimeoutError, FutureTimeout, ValueError, MemoryError) as error:
        raise ClusterError(
            f"no Dask scheduler answered at {scheduler} within {timeout:g} s "
            f"({_reason(error)}); {hint}"
        ) from error
    finally:
        pool.shutdown(wait=False)
    if not (isinstance(answer, dict) and answer.get("type") == "Scheduler"):
        kind = answer.get("type") if isinstance(answer, dict) else None
        raise ClusterError(
            f"{scheduler} is not a Dask scheduler (it answered as {kind or repr(answer)[:80]}); "
            f"{hint}"
        )
