"""Explanations streamed to a Parquet file, one row group per chunk, for outputs larger than
memory.

Layout (one row per query point, in the order of X): ``row`` (0-based position in X),
``prediction`` (latent posterior mean), ``mean[<feature>]`` per feature, with covariance
``cov[<feature_i>,<feature_j>]`` for i <= j (the upper triangle, diagonal included; the
matrix is symmetric), ``difference_variance`` (``Var[f(x) - f(baseline)]``, the variance
completeness target) and ``baseline_prediction`` when the functional has them. Read it back
with ``pandas.read_parquet`` (or ``pyarrow.parquet`` row group by row group).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from gpexplain._validation import check_finite_result

__all__ = ["check_output_path", "write_parquet"]


def check_output_path(output_path) -> Path | None:
    """The output path as a ``Path`` (None stays None).

    Raises
    ------
    TypeError
        Not a str or os.PathLike.
    ValueError
        Its folder does not exist, or it does not end in ``.parquet``.
    """
    if output_path is None:
        return None
    if not isinstance(output_path, str | Path):
        raise TypeError(
            f"output_path must be a str or pathlib.Path ending in .parquet, got "
            f"{type(output_path).__name__}."
        )
    path = Path(output_path)
    if path.suffix != ".parquet":
        raise ValueError(f"output_path must end in .parquet, got {str(path)!r}.")
    if not path.parent.is_dir():
        raise ValueError(f"output_path's folder {str(path.parent)!r} does not exist.")
    return path


def _columns(outputs: tuple, first_row: int, names: list[str]) -> dict[str, np.ndarray]:
    mean, cov, prediction, reference, difference_variance = outputs
    columns = {"row": np.arange(first_row, first_row + len(mean)), "prediction": prediction}
    columns |= {f"mean[{name}]": mean[:, i] for i, name in enumerate(names)}
    if cov is not None:
        for i, j in zip(*np.triu_indices(len(names)), strict=True):
            columns[f"cov[{names[i]},{names[j]}]"] = cov[:, i, j]
    if difference_variance is not None:
        columns["difference_variance"] = difference_variance
    if reference is not None:
        columns["baseline_prediction"] = reference
    return columns


def write_parquet(path: Path, chunks: Iterable[tuple], names: list[str], caller: str) -> Path:
    """Write the driver's per-chunk outputs to ``path`` as they arrive; return ``path``.

    Each chunk is checked finite before it is written (``FloatingPointError`` otherwise, and
    the partial file is removed), so nothing non-finite reaches the file.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer, first_row = None, 0
    try:
        for outputs in chunks:
            check_finite_result(caller, *(output for output in outputs if output is not None))
            table = pa.table(_columns(outputs, first_row, names))
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
            first_row += len(outputs[0])
    except BaseException:
        if writer is not None:
            writer.close()
        path.unlink(missing_ok=True)
        raise
    if writer is None:
        raise ValueError("X has no rows; there is nothing to write.")
    writer.close()
    return path
