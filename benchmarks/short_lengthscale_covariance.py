"""Covariance of probability-level integrated gradients across a short-lengthscale indicator
(issue 27 item 9): the tensor path rule against the panelled pair rule on Guerry.

A GP classifier of literacy above the median from Region, MainCity, Crime_pers, Crime_prop,
Wealth, Commerce and Clergy (``gx.make_pipeline(gx.GPClassifier(random_state=0))``, 85
departments with a region; ``Region_S``'s fitted lengthscale 0.0036, prior variance 20),
explained against the typical row (region C). For the first department of region S (the
others give the same numbers to 3 digits): the default route, then each rule forced, the
panelled rule at 8 and 16 nodes per panel and the tensor rule at 128 nodes, with the logit
link (its bivariate expectations by Mehler's series and a 2-D quadrature) and the probit
link on the same posterior (closed-form pair expectations): the Region attribution's std,
the variance completeness gap ``|1^T cov 1 - Var(p(x) - p(xt))|``, the wall and CPU seconds
and, for the panelled rules, the price the default route compares with its 30 s limit.
Every forced rule runs with one native thread, as the default route does
(``gpexplain._threads.native_threads``).

Run from the repository root::

    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/short_lengthscale_covariance.py

(about 2 minutes). Results: ``benchmarks/results/short_lengthscale_covariance.json``. With
``--before``, the same cases on the code imported (an older commit's ``src`` on
``PYTHONPATH``, named by ``--commit``) go to ``short_lengthscale_covariance_before.json``,
which a later run without ``--before`` copies into its own results beside the speed-ups.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS, data_path, machine_info, write_results  # noqa: E402

import gpexplain as gx  # noqa: E402
from gpexplain._threads import native_threads  # noqa: E402
from gpexplain.datasets import read_table  # noqa: E402
from gpexplain.explain.linked import link_covariance, path_pairs  # noqa: E402
from gpexplain.functionals.gradient import Gradient  # noqa: E402
from gpexplain.links import Logit, Probit  # noqa: E402

COLUMNS = ["Region", "MainCity", "Crime_pers", "Crime_prop", "Wealth", "Commerce", "Clergy"]
NAME = "short_lengthscale_covariance"


def _timed(function):
    """``function()``, its wall and CPU seconds (CPU: the measure a shared machine inflates
    least)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = function()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def _row(cov, target, wall, cpu, region):
    return {"region_std": float(np.sqrt(cov[np.ix_(region, region)].sum())),
            "variance_gap": float(abs(cov.sum() - target)),
            "difference_variance": float(target), "seconds": wall, "cpu_seconds": cpu}


def _speedups(results, before):
    """Before/after seconds of every case both runs have."""
    out = {}
    for key, after in results.items():
        if isinstance(after, dict) and "seconds" in after and key in before:
            old = before[key]
            out[key] = {"seconds_before": old["seconds"], "seconds_after": after["seconds"],
                        "cpu_before": old.get("cpu_seconds"), "cpu_after": after["cpu_seconds"],
                        "gap_before": old["variance_gap"], "gap_after": after["variance_gap"],
                        "region_std_before": old["region_std"],
                        "region_std_after": after["region_std"]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", action="store_true",
                        help=f"write {NAME}_before.json (the code imported is an older one)")
    parser.add_argument("--commit", help="the commit of the code imported, with --before")
    args = parser.parse_args()
    machine = machine_info(note="shared 2-core machine: other jobs ran at the same time")
    if args.before:
        machine["gpexplain_git_commit"] = args.commit
        machine["gpexplain_source"] = str(Path(gx.__file__).parent)
    table = read_table(data_path("guerry", "guerry.csv")).dropna()
    X = table[COLUMNS]
    y = np.where(table["Literacy"] > table["Literacy"].median(), "high", "low")
    pipeline = gx.make_pipeline(gx.GPClassifier(random_state=0)).fit(X, y)
    encoder, posterior = pipeline.encoder_, pipeline.estimator_.posterior_
    names = list(encoder.transform(X.iloc[:1]).columns)
    row = int(np.flatnonzero(X["Region"].to_numpy() == "S")[0])
    results = {"machine": machine, "row": row, "n_rows": len(X),
               "lengthscales": dict(zip(names, np.asarray(posterior.kernel.lengthscale)
                                        .tolist(), strict=True))}

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        default, wall, cpu = _timed(lambda: gx.integrated_gradients(pipeline, X.iloc[[row]]))
    i = default.feature_names.index("Region")
    results["default"] = {
        "region_std": float(np.sqrt(default.cov[0, i, i])),
        "variance_gap": float(default.completeness_gap()["variance"]),
        "difference_variance": float(default.difference_variance[0]), "seconds": wall,
        "cpu_seconds": cpu, "method": default.method,
        "warnings": [str(w.message) for w in caught]}
    print("default", results["default"], flush=True)

    x, baseline = encoder.transform(X.iloc[[row]]).to_numpy(float)[0], encoder.typical_
    terms = [link_covariance.LatentTerm(1.0, posterior,
                                        Gradient().bind(posterior.kernel, posterior.train_inputs))]
    region = [k for k, name in enumerate(names) if name.startswith("Region_")]
    scale = path_pairs.path_step_scale(terms, x, baseline)
    variance = float(link_covariance._path_variance(terms, x[None], baseline)[0])
    for link in (Logit(), Probit()):
        target = link_covariance._difference_variance(link, terms, x, baseline)
        prices = path_pairs.pair_rule_seconds(link, terms, x, baseline, scale, variance)
        for n_nodes, price in zip(path_pairs.PANEL_NODES, prices, strict=True):
            with native_threads(len(X)):
                cov, wall, cpu = _timed(lambda n=n_nodes, k=link: path_pairs.pair_rule_covariance(
                    k, terms, x, baseline, scale, n))
            results[f"panelled_{link.name}_{n_nodes}"] = {
                **_row(cov, target, wall, cpu, region), "priced_seconds": float(price)}
        with native_threads(len(X)):
            cov, wall, cpu = _timed(lambda k=link: link_covariance._covariance_on_rule(
                k, terms, x, baseline, 128))
        results[f"tensor_{link.name}_128"] = _row(cov, target, wall, cpu, region)
        print(link.name, {k: v for k, v in results.items() if link.name in k}, flush=True)
    if args.before:
        print(write_results(f"{NAME}_before", results))
        return
    before_path = RESULTS / f"{NAME}_before.json"
    if before_path.is_file():
        before = json.loads(before_path.read_text())
        results["before"] = {"commit": before["machine"]["gpexplain_git_commit"],
                             "cases": _speedups(results, before)}
    print(write_results(NAME, results))


if __name__ == "__main__":
    main()
