"""Covariance of probability-level integrated gradients across a short-lengthscale indicator
(issue 27 item 9): the tensor path rule against the panelled pair rule on Guerry.

A GP classifier of literacy above the median from Region, MainCity, Crime_pers, Crime_prop,
Wealth, Commerce and Clergy (``gx.make_pipeline(gx.GPClassifier(random_state=0))``, 85
departments with a region; ``Region_S``'s fitted lengthscale 0.0036, prior variance 20),
explained against the typical row (region C). For the first department of region S (the
others give the same numbers to 3 digits), by the default route (the panelled rule is priced
past the 30 s per point limit, so the tensor rule stands and a warning says so) and with the
panelled rule forced (8 nodes per panel, logit), then with the probit link on the same
posterior (8 and 16 nodes per panel, closed-form pair expectations): the Region attribution's
std, the variance completeness gap ``|1^T cov 1 - Var(p(x) - p(xt))|`` and the seconds.

Run from the repository root::

    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/short_lengthscale_covariance.py

(about 5 minutes). Results: ``benchmarks/results/short_lengthscale_covariance.json``.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import data_path, machine_info, write_results  # noqa: E402

import gpexplain as gx  # noqa: E402
from gpexplain.datasets import read_table  # noqa: E402
from gpexplain.explain.linked import link_covariance, path_pairs  # noqa: E402
from gpexplain.functionals.gradient import Gradient  # noqa: E402
from gpexplain.links import Logit, Probit  # noqa: E402

COLUMNS = ["Region", "MainCity", "Crime_pers", "Crime_prop", "Wealth", "Commerce", "Clergy"]


def _row(cov, target, seconds, region):
    return {"region_std": float(np.sqrt(cov[np.ix_(region, region)].sum())),
            "variance_gap": float(abs(cov.sum() - target)),
            "difference_variance": float(target), "seconds": seconds}


def main() -> None:
    machine = machine_info(note="shared 2-core machine: other jobs ran at the same time")
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

    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        default = gx.integrated_gradients(pipeline, X.iloc[[row]])
    seconds = time.perf_counter() - start
    i = default.feature_names.index("Region")
    results["default"] = {
        "region_std": float(np.sqrt(default.cov[0, i, i])),
        "variance_gap": float(default.completeness_gap()["variance"]),
        "difference_variance": float(default.difference_variance[0]), "seconds": seconds,
        "method": default.method, "warnings": [str(w.message) for w in caught]}

    x, baseline = encoder.transform(X.iloc[[row]]).to_numpy(float)[0], encoder.typical_
    terms = [link_covariance.LatentTerm(1.0, posterior,
                                        Gradient().bind(posterior.kernel, posterior.train_inputs))]
    region = [k for k, name in enumerate(names) if name.startswith("Region_")]
    scale = path_pairs.path_step_scale(terms, x, baseline)
    for link, rules in ((Logit(), (8,)), (Probit(), (8, 16))):
        target = link_covariance._difference_variance(link, terms, x, baseline)
        for n_nodes in rules:
            start = time.perf_counter()
            cov = path_pairs.pair_rule_covariance(link, terms, x, baseline, scale, n_nodes)
            results[f"panelled_{link.name}_{n_nodes}"] = _row(
                cov, target, time.perf_counter() - start, region)
        start = time.perf_counter()
        cov = link_covariance._covariance_on_rule(link, terms, x, baseline, 128)
        results[f"tensor_{link.name}_128"] = _row(cov, target, time.perf_counter() - start,
                                                  region)
        print(link.name, {k: v for k, v in results.items() if link.name in k}, flush=True)
    print(write_results("short_lengthscale_covariance", results))


if __name__ == "__main__":
    main()
