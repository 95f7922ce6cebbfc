"""Property-based fuzzing of the public API (hypothesis).

Marked ``fuzz``: not in the default run yet, because the defect classes found by the first
fuzzing campaign (issue "No silently wrong result") are still being fixed; ``pytest -m fuzz``
runs it. ``GPEXPLAIN_FUZZ_PROFILE=long`` runs many more examples (nightly).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.cases import CASES

settings.register_profile(
    "default-suite", max_examples=20, derandomize=True, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long", max_examples=400, derandomize=False, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = os.environ.get("GPEXPLAIN_FUZZ_PROFILE", "default-suite")

pytestmark = pytest.mark.fuzz


@pytest.mark.parametrize("case", CASES, ids=[case.__name__ for case in CASES])
def test_every_outcome_is_ok(case):
    @settings(settings.get_profile(PROFILE))
    @given(st.data())
    def run(data):
        outcome = case(data)
        assert outcome.kind == "ok", outcome.detail

    run()
