"""Count fuzzing outcomes per class: ``python -m tests.fuzz.campaign --examples 200``.

Prints, for each case, how many generated examples ended in each outcome class of
``tests.fuzz.harness.OUTCOMES`` and one example detail per class, and writes them as JSON
with ``--output``.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as seed_decorator
from hypothesis import strategies as st

from tests.fuzz.cases import CASES
from tests.fuzz.harness import OUTCOMES


def run_campaign(examples: int, seed: int) -> dict:
    results = {}
    for case in CASES:
        results[case.__name__] = _count(case, examples, seed)
    return results


def _count(case, examples: int, seed: int) -> dict:
    counts, details = Counter(), {}

    @seed_decorator(seed)
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def collect(data):
        outcome = case(data)
        counts[outcome.kind] += 1
        details.setdefault(outcome.kind, outcome.detail)

    collect()
    return {"counts": {kind: counts.get(kind, 0) for kind in OUTCOMES}, "example": details}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output")
    args = parser.parse_args()
    results = run_campaign(args.examples, args.seed)
    for name, result in results.items():
        print(name, result["counts"])
        for kind, detail in result["example"].items():
            if kind != "ok":
                print(f"    {kind}: {detail[:200]}")
    if args.output:
        with open(args.output, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
