"""How many native threads the library's own computations use (BLAS, OpenMP, torch).

A process that imports gpexplain holds up to four native thread pools: NumPy's and SciPy's
OpenBLAS (two separate libraries), torch's OpenMP and scikit-learn's OpenMP, each sized to
every core by default. A fit or an explanation is thousands of medium-sized matrix
operations that alternate between them; the pools' worker threads busy-wait between calls,
so on a small machine they take the cores from each other. Measured on 2 cores (red wine,
500 rows, exact GP fit): 52 s of CPU with the default pools against 3.0 s with one thread
each; a Cholesky factorisation with inverse at n = 4,000 took 37 s of CPU with two OpenBLAS
threads against 4.8 s with one (the machine running other jobs, as user machines do).

So every fit, prediction-heavy step and explanation runs inside ``native_threads(n_rows)``,
which sets all pools to the same count for its duration and restores them afterwards:

* one thread below ``PARALLEL_ROWS`` rows, where the threads' synchronisation costs more
  than the parallel work saves;
* from ``PARALLEL_ROWS`` rows, the usable cores but one (at least one), so that the cubic
  factorisations of large exact GPs use the machine while leaving a core to the rest of it.

``set_num_threads(n)`` replaces the policy with a fixed count (``None`` restores it). Dask
workers apply the same policy inside each task, so nothing needs an environment variable.

Limitation: the BLAS pools are process-wide while OpenMP's and torch's counts belong to the
calling thread, so two Python threads computing at once in one process (a Dask worker with
several threads) can restore the BLAS count under each other; the library's own clusters run
one thread per worker process (``parallel.dask_client``).
"""

from __future__ import annotations

import contextlib
import os
import threading

import torch
from threadpoolctl import threadpool_limits

__all__ = ["PARALLEL_ROWS", "native_threads", "set_num_threads", "thread_count"]

PARALLEL_ROWS = 5000

_fixed_count: int | None = None
# Nested calls (a fit that predicts, an explanation inside a fit's report) keep the outer
# limit: only the outermost call of each Python thread sets and restores the pools.
_active = threading.local()


def set_num_threads(n_threads: int | None) -> None:
    """Fix the number of native threads the library's computations use.

    Parameters
    ----------
    n_threads : int >= 1 or None
        Threads for BLAS, OpenMP and torch during gpexplain's fits and explanations. ``None``
        (the default) restores the automatic policy: one thread below 5,000 training rows,
        the usable cores but one from there.

    Raises
    ------
    TypeError
        ``n_threads`` is not an integer or None.
    ValueError
        ``n_threads`` is below 1.
    """
    global _fixed_count
    if n_threads is not None:
        if isinstance(n_threads, bool) or not isinstance(n_threads, int):
            raise TypeError(
                f"n_threads must be a positive integer or None (automatic), got "
                f"{type(n_threads).__name__} {n_threads!r}"
            )
        if n_threads < 1:
            raise ValueError(
                f"n_threads must be a positive integer or None (automatic), got {n_threads}"
            )
    _fixed_count = n_threads


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def thread_count(n_rows: int) -> int:
    """Native threads for a computation over ``n_rows`` training rows (see the module text)."""
    if _fixed_count is not None:
        return _fixed_count
    if n_rows < PARALLEL_ROWS:
        return 1
    return max(1, usable_cores() - 1)


@contextlib.contextmanager
def native_threads(n_rows: int):
    """Run the block with ``thread_count(n_rows)`` threads in every native pool."""
    if getattr(_active, "depth", 0):
        _active.depth += 1
        try:
            yield
        finally:
            _active.depth -= 1
        return
    count = thread_count(n_rows)
    torch_threads = torch.get_num_threads()
    _active.depth = 1
    try:
        with threadpool_limits(limits=count):
            torch.set_num_threads(count)
            yield
    finally:
        torch.set_num_threads(torch_threads)
        _active.depth = 0
