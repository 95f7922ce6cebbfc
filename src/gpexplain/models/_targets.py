"""Several regression targets: the columns of a 2-D y, by name (issue 24)."""

from __future__ import annotations

import numpy as np

from gpexplain._torch import to_numpy

__all__ = ["target_columns"]


def target_columns(y) -> dict[str, object] | None:
    """``{output name: column}`` for a y of more than one column; None for one column.

    A DataFrame's columns keep their names (and stay pandas Series); other 2-D arrays (NumPy,
    torch, lists of rows) give ``y0, y1, ...``. The columns are validated by the fit of each
    output.

    Raises
    ------
    ValueError
        A y with more than two dimensions, or repeated DataFrame column names.
    """
    if hasattr(y, "columns") and hasattr(y, "iloc"):
        if y.shape[1] <= 1:
            return None
        names = [str(name) for name in y.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"y has repeated column names {names}; name each output once.")
        return {name: y.iloc[:, j] for j, name in enumerate(names)}
    if hasattr(y, "detach"):
        y = to_numpy(y)
    if hasattr(y, "shape") or isinstance(y, list | tuple):
        values = y if hasattr(y, "shape") else np.asarray(y)
        if values.ndim > 2:
            raise ValueError(f"y must be 1-D or 2-D (one column per output), got shape "
                             f"{values.shape}.")
        if values.ndim == 2 and values.shape[1] > 1:
            return {f"y{j}": np.asarray(values[:, j]) for j in range(values.shape[1])}
    return None
