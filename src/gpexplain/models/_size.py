"""What an exact GP fit will cost, estimated before it starts: refuse what cannot fit in memory
and warn about what will take long (20,000 rows died with a raw MemoryError after 35 s; 10,000
rows fitted for over 20 minutes with only a spinner)."""

from __future__ import annotations

import os
import warnings

__all__ = ["available_memory", "check_exact_size", "exact_fit_estimate"]

# Peak memory of GPRegressor().fit (8 features, defaults: 1 + 3 starts) above the memory held
# before it, in float64 n x n matrices: 4.76 at n = 1000 and 4.46 at n = 2000 (ru_maxrss);
# the kernel matrix, its Cholesky factor and the optimiser's gradient terms.
N_BY_N_COPIES = 5
# The same fits took 8.4 s (n = 1000) and 51 s (n = 2000) on 2 cores with OMP_NUM_THREADS=1:
# n^3 / 1.2e8 seconds for the 4 default starts, the slower of the two rates.
CUBES_PER_SECOND = 1.2e8
DEFAULT_STARTS = 4
# Conditioning on all rows once (hyperparameters fitted on a subsample): the kernel matrix, its
# Cholesky factor and a distance matrix while the kernel is built.
CONDITIONING_COPIES = 3
# One-thread LAPACK Cholesky on this machine class (float64, AVX2).
CONDITIONING_FLOPS_PER_SECOND = 2e10
SLOW_FIT_SECONDS = 600.0
_ALTERNATIVES = (
    "gx.SparseGPRegressor (--model sparse) or gx.RandomFeatureGPRegressor "
    "(--model random-features) fit in O(n) memory"
)


# (limit, usage, the key of the reclaimable cache in the folder's memory.stat): cgroup v2, v1
CGROUP_MEMORY_FILES = (
    ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "inactive_file"),
    ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes",
     "total_inactive_file"),
)


def available_memory() -> int:
    """Bytes of memory this process can still take: the least of the machine's available
    memory (psutil when installed, else the physical memory), the address-space limit
    (``ulimit -v``) less this process's size, and a cgroup's memory limit (a container or
    job scheduler) less its usage. Without the last two, a fit under ``ulimit -v`` or in a
    container passed the check and died with a raw MemoryError."""
    try:
        import psutil
    except ImportError:
        machine = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    else:
        machine = int(psutil.virtual_memory().available)
    return max(0, min([machine, *_address_space_left(), *_cgroup_memory_left()]))


def _address_space_left() -> list[int]:
    """``[RLIMIT_AS - this process's virtual size]`` under an address-space limit, else []."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit == resource.RLIM_INFINITY:
            return []
        with open("/proc/self/statm") as statm:  # sizes in pages; the first is the total
            size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):  # not Linux: no limit is known
        return []
    return [limit - size]


def _cgroup_memory_left() -> list[int]:
    """``[limit - usage]`` of this process's memory cgroup (v2, else v1; the usage less its
    inactive file cache, which the kernel reclaims), or [] when it has no limit."""
    for limit_file, usage_file, cache_key in CGROUP_MEMORY_FILES:
        try:
            with open(limit_file) as handle:
                text = handle.read().strip()
            if text == "max" or int(text) >= 1 << 60:  # no limit ("max"; v1: a huge number)
                return []
            with open(usage_file) as handle:
                usage = int(handle.read())
            with open(os.path.join(os.path.dirname(limit_file), "memory.stat")) as handle:
                stat = dict(line.split() for line in handle if len(line.split()) == 2)
        except (OSError, ValueError):
            continue
        return [int(text) - usage + int(stat.get(cache_key, 0))]
    return []


def exact_fit_estimate(n_rows: int, n_starts: int = DEFAULT_STARTS) -> tuple[int, float]:
    """``(bytes, seconds)`` an exact GP fit on ``n_rows`` rows from ``n_starts`` starts needs,
    from the constants measured above (the seconds are for this machine class, a rough guide)."""
    n_bytes = N_BY_N_COPIES * 8 * n_rows * n_rows
    seconds = n_rows**3 / CUBES_PER_SECOND * n_starts / DEFAULT_STARTS
    return n_bytes, seconds


def device_memory(device) -> int:
    """Bytes free on a CUDA ``device`` (``torch.cuda.mem_get_info``); the host's otherwise."""
    if device is not None and device.type == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    return available_memory()


def check_exact_size(n_rows: int, n_starts: int = DEFAULT_STARTS,
                     fit_rows: int | None = None, device=None) -> None:
    """Refuse an exact GP fit that cannot fit in memory; warn when it will take long.

    ``fit_rows``: the hyperparameters are fitted on that many of the rows (``GPRegressor``'s
    ``hyperparameter_rows``) and the posterior conditions on all ``n_rows`` once, which holds
    ``CONDITIONING_COPIES`` n x n matrices and costs ``n^3 / 3`` flops. ``device`` (a
    ``torch.device``): the conditioning runs there (``ExactPosterior(device=...)``), so its
    matrices are checked against that device's free memory and its time is not estimated.

    Raises
    ------
    ValueError
        The estimated memory exceeds ``available_memory()``; the message gives the estimate and
        the alternatives.

    Warns
    -----
    UserWarning
        The estimated time exceeds ``SLOW_FIT_SECONDS``.
    """
    n_bytes, seconds = exact_fit_estimate(n_rows, n_starts)
    copies = N_BY_N_COPIES
    if fit_rows is not None and fit_rows < n_rows:
        fit_bytes, seconds = exact_fit_estimate(fit_rows, n_starts)
        copies = CONDITIONING_COPIES
        conditioning_bytes = copies * 8 * n_rows * n_rows
        if device is not None:
            _check_memory(n_rows, conditioning_bytes, copies, device_memory(device),
                          f" on {device}")
            conditioning_bytes, copies = 0, N_BY_N_COPIES  # the host holds the fit's only
        else:
            seconds += n_rows**3 / 3 / CONDITIONING_FLOPS_PER_SECOND
        n_bytes = max(fit_bytes, conditioning_bytes)
    _check_memory(n_rows, n_bytes, copies, available_memory(), "")
    if seconds > SLOW_FIT_SECONDS:
        warnings.warn(
            f"the exact GP on {n_rows} rows will take about {seconds / 60:.0f} minutes to fit "
            f"(O(n^3), {n_starts} start(s)) and about {n_bytes / 2**30:.1f} GiB; "
            f"{_ALTERNATIVES} much faster",
            UserWarning,
            stacklevel=4,
        )


def _check_memory(n_rows: int, n_bytes: int, copies: int, available: int, where: str) -> None:
    if n_bytes > available:
        raise ValueError(
            f"an exact GP on {n_rows} rows needs about {n_bytes / 2**30:.1f} GiB "
            f"({copies} n x n float64 matrices), more than the "
            f"{available / 2**30:.1f} GiB available{where}; {_ALTERNATIVES}"
        )
