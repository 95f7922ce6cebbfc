"""Keep BoTorch's import-time changes to GPyTorch's global settings out of the test session.

Importing ``botorch`` sets process-wide defaults of ``linear_operator.settings`` and
``gpytorch.settings`` (``botorch/__init__.py``: ``cholesky_max_tries`` 6 instead of 3,
``max_cholesky_size`` 4096, no fast solves, ...). gpexplain's own fits run under whatever is
set, so a test module importing BoTorch at collection would change how every other test's fit
behaves (e.g. a Cholesky that fails at 3 tries succeeds at 6). BoTorch tests import it inside
``unchanged_gpytorch_settings()``.
"""

from __future__ import annotations

from contextlib import contextmanager

_STATE_ATTRIBUTES = ("_default", "_global_value", "_state")


def _snapshot():
    import gpytorch.settings
    import linear_operator.settings

    saved = []
    for module in (linear_operator.settings, gpytorch.settings):
        for value in vars(module).values():
            if isinstance(value, type):
                saved += [
                    (value, name, vars(value)[name])
                    for name in _STATE_ATTRIBUTES
                    if name in vars(value)
                ]
    return saved


@contextmanager
def unchanged_gpytorch_settings():
    """Restore every GPyTorch / linear_operator setting class's state on exit."""
    saved = _snapshot()
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
