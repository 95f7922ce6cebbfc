"""Optional dependencies, imported where they are first used.

``import gpexplain`` loads none of the extras (shap, BoTorch, cvxpy, pymoo): each feature that
needs one asks for it through ``require``, which names the extra to install when it is missing.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


def require(module: str, extra: str, needed_by: str) -> ModuleType:
    """Import an optional module, or say which gpexplain extra provides it.

    Parameters
    ----------
    module : str
        The dotted module name, e.g. ``"cvxpy"`` or ``"botorch.models"``.
    extra : str
        The ``pyproject.toml`` extra that installs it, e.g. ``"poe"``.
    needed_by : str
        The feature that needs it, for the message, e.g. ``"Attribution.to_shap"``.

    Returns
    -------
    types.ModuleType
        The imported module.

    Raises
    ------
    ImportError
        The module is not installed; the message names ``pip install "gpexplain[extra]"``.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        package = module.partition(".")[0]
        raise ImportError(
            f'{needed_by} needs {package}: pip install "gpexplain[{extra}]".'
        ) from None
