"""What every benchmark records about its run, and how it writes its JSON.

Imported by the benchmark scripts (run as scripts, so this directory is on ``sys.path``).
Heavy libraries are imported inside the functions: the scripts set their thread environment
variables before NumPy and torch load, and importing this module must not load them first.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"

# Distributions whose versions can change a benchmark's numbers; the ones not installed are
# left out of the record.
DISTRIBUTIONS = ("numpy", "scipy", "scikit-learn", "pandas", "torch", "gpytorch",
                 "linear_operator", "captum", "shap", "lime", "gpexplain")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "OMP_WAIT_POLICY")


def data_path(*parts: str) -> Path:
    """A file of the real data sets, under the folder named by ``GPEXPLAIN_DATA_DIR``.

    The benchmarks' data sets are not bundled (licences and size); ``make bench`` points the
    variable at the project's shared data folder. Exits with a clear message when the variable
    is unset or the file is missing.
    """
    root = os.environ.get("GPEXPLAIN_DATA_DIR")
    if not root:
        sys.exit("set GPEXPLAIN_DATA_DIR to the folder holding the real data sets "
                 "(e.g. GPEXPLAIN_DATA_DIR=../shared/data); `make bench` sets it.")
    path = Path(root).joinpath(*parts)
    if not path.is_file():
        sys.exit(f"{path} not found: GPEXPLAIN_DATA_DIR must hold {Path(*parts)}.")
    return path


def git_commit() -> str | None:
    """HEAD of the repository, marked ``(src modified)`` when ``src`` has uncommitted changes."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "src"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + (" (src modified)" if dirty else "")


def versions() -> dict[str, str]:
    """Python and the installed versions of ``DISTRIBUTIONS``."""
    found = {"python": platform.python_version()}
    for name in DISTRIBUTIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (the architecture where there is none)."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(**extra) -> dict:
    """Cores, CPU, thread settings, load, versions, git commit and command of this run.

    Called at the start of a run (the commit recorded is the one whose code was imported);
    ``extra`` entries (e.g. a requested thread count) are added as given, and
    ``write_results`` adds the end-of-run load and CPU time.
    """
    import torch

    info = {
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu": cpu_model(),
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "thread_environment": {name: os.environ.get(name) for name in THREAD_VARIABLES},
        "load_average_start": list(os.getloadavg()),
        "versions": versions(),
        "gpexplain_git_commit": git_commit(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    try:
        from threadpoolctl import threadpool_info

        info["native_thread_pools"] = [
            {key: pool.get(key) for key in ("internal_api", "num_threads", "version")}
            for pool in threadpool_info()
        ]
    except ImportError:
        pass
    info.update(extra)
    return info


def write_results(target: str | Path, payload: dict) -> Path:
    """Write ``payload`` as JSON and return the path written.

    ``target`` is a result name (written to ``benchmarks/results/<name>.json``) or a path.
    The end-of-run load average and the process's CPU seconds (the one-core budget's measure:
    wall time inflates when the machine is shared) are added to ``payload["machine"]``.
    """
    path = RESULTS / f"{target}.json" if isinstance(target, str) else Path(target)
    machine = payload.setdefault("machine", {})
    machine["load_average_end"] = list(os.getloadavg())
    machine["process_cpu_seconds"] = time.process_time()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, allow_nan=True) + "\n")
    return path


def best_of(function, repeats: int = 1):
    """``(result, seconds)``: the last result of ``function()`` and its fastest wall time over
    ``repeats`` calls (the minimum is the least disturbed by other jobs on a shared machine)."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return result, best
