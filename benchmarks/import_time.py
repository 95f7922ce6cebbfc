"""Start-up cost: CPU seconds of ``import gpexplain`` and ``gpexplain --version``.

Every CLI call and every worker process pays the import, so it is measured in fresh
interpreters (CPU time of the child, user + system: wall time grows with the other jobs on a
shared machine), median of ``--repeats`` runs, the cases interleaved so that a change of load
hits them alike. Measured beside what it cannot go below and what users import instead:

* ``torch + gpytorch``: the floor (gpexplain needs both at import);
* ``shap``, ``captum.attr``: the explainers users wrap a GP in today (when installed);
* with ``--base-src DIR``: the same two gpexplain cases on another checkout's ``src`` folder
  (e.g. a worktree of an earlier commit), for a before/after.

Also records which optional or plotting modules ``import gpexplain`` loaded (none expected).

    .venv/bin/python benchmarks/import_time.py                       # writes import_time.json
    .venv/bin/python benchmarks/import_time.py --base-src ../old/src  # with a before/after
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from _common import REPO, machine_info, write_results

OPTIONAL = ("matplotlib", "dask", "distributed", "cvxpy", "shap", "pymoo", "captum", "botorch")
GPEXPLAIN_CASES = {
    "import gpexplain": "import gpexplain",
    "gpexplain --version": (
        "import sys; from gpexplain.cli import app; sys.argv = ['gpexplain', '--version']\n"
        "try:\n    app()\nexcept SystemExit:\n    pass"
    ),
}
OTHER_CASES = {
    "torch + gpytorch (floor)": "import torch, gpytorch",
    "shap": "import shap",
    "captum.attr": "import captum.attr",
}


def child_cpu_seconds(code: str, src: Path | None) -> float:
    """CPU seconds (user + system) of a fresh interpreter running ``code``."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def importable(module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"],
                          capture_output=True).returncode == 0


def loaded_optional(src: Path) -> list[str]:
    """The optional or plotting top-level packages ``import gpexplain`` left in sys.modules."""
    code = ("import json, sys, gpexplain; "
            "print(json.dumps(sorted({m.partition('.')[0] for m in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(src)})
    return [name for name in json.loads(done.stdout) if name in OPTIONAL]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--base-src", type=Path, default=None,
                        help="another checkout's src folder, measured beside this one")
    args = parser.parse_args()
    here = REPO / "src"
    cases = {f"{name} (this tree)": (code, here) for name, code in GPEXPLAIN_CASES.items()}
    if args.base_src is not None:
        cases.update({f"{name} (--base-src)": (code, args.base_src.resolve())
                      for name, code in GPEXPLAIN_CASES.items()})
    cases.update({name: (code, None) for name, code in OTHER_CASES.items()
                  if importable(code.split()[1].rstrip(","))})
    samples = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, (code, src) in cases.items():
            samples[name].append(child_cpu_seconds(code, src))
    results = {name: {"median_cpu_seconds": statistics.median(values),
                      "cpu_seconds": values} for name, values in samples.items()}
    for name, result in results.items():
        print(f"{name:40s} {result['median_cpu_seconds']:.3f} s CPU (median of {args.repeats})")
    payload = {
        "benchmark": "import_time",
        "repeats": args.repeats,
        "base_src": None if args.base_src is None else str(args.base_src),
        "results": results,
        "optional_modules_loaded_by_import_gpexplain": loaded_optional(here),
        "machine": machine_info(),
    }
    print("written:", write_results("import_time", payload))


if __name__ == "__main__":
    main()
