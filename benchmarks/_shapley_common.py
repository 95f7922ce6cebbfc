"""What the additive-GP Shapley benchmarks share: one-core setup, data loaders, run records.

Imported by ``shapley_speed.py``, ``feature_selection.py`` and ``oak_accuracy.py`` (run as
scripts, so this directory is on ``sys.path``).
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
RESULTS = REPO / "benchmarks" / "results"

def machine_info() -> dict:
    """Cores, versions, thread settings and git commit, recorded with every result."""
    import numpy as np
    import scipy
    import sklearn
    import torch

    info = {
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "thread_environment": {name: os.environ.get(name) for name in (
            "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
        "load_average_start": list(os.getloadavg()),
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__,
            "torch": torch.__version__,
        },
    }
    try:
        import shap

        info["versions"]["shap"] = shap.__version__
    except ImportError:
        pass
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "src"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        info["gpexplain_git_commit"] = commit + (" (src modified)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        pass
    return info


def write_results(name: str, payload: dict) -> Path:
    """Write ``benchmarks/results/<name>.json`` with the end-of-run load average added."""
    import json

    payload.setdefault("machine", {})["load_average_end"] = list(os.getloadavg())
    path = RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, allow_nan=True) + "\n")
    return path


# -- real data sets (../shared/data, see its README for provenance) ----------------------------
def load_auto_mpg():
    """Auto MPG as in the additive-GP literature: ``autompg.mat``, 392 complete rows.

    ``autompg.txt`` has the same rows plus 6 whose horsepower is NaN; the .mat is the 392-row
    version used by Duvenaud et al. (2011) and Lu et al. (2022). Returns X (7 features) and
    y = mpg.
    """
    import pandas as pd
    from scipy.io import loadmat

    contents = loadmat(DATA / "auto_mpg" / "autompg.mat")
    names = [str(entry[0]) for entry in contents["varNames"].ravel()]
    values = contents["X"].astype(float)
    if names[0] != "mpg":  # the loader relies on the file's documented column order
        raise ValueError(f"autompg.mat: expected 'mpg' as the first variable, got {names}")
    return pd.DataFrame(values[:, 1:], columns=names[1:]), values[:, 0]


def load_concrete():
    """Concrete compressive strength (1030 rows): X (8 mixture/age features), y in MPa."""
    import pandas as pd

    frame = pd.read_csv(DATA / "concrete" / "Concrete_Data.csv")
    # The UCI header spells out units; keep the component name only.
    names = [column.split("(")[0].strip().lower().replace(" ", "_") for column in frame.columns]
    frame.columns = names
    return frame.iloc[:, :-1], frame.iloc[:, -1].to_numpy(dtype=float)
