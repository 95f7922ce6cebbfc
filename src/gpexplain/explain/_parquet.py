"""Explanations streamed to a Parquet file, one row group per chunk, for outputs larger than
memory.

Layout (one row per query point, in the order of X): ``row`` (0-based position in X),
``prediction`` (latent posterior mean), ``mean[<feature>]`` per feature, with covariance
``cov[<i>,<j>]`` for i <= j (0-based feature positions, the order of the ``mean`` columns; the
upper triangle, diagonal included; the matrix is symmetric), ``difference_variance``
(``Var[f(x) - f(baseline)]``, the variance completeness target) and ``baseline_prediction``
when the functional has them. The feature names are also in the schema's metadata (key
``gpexplain.feature_names``, a JSON list). Read it back with ``pandas.read_parquet`` (or
``pyarrow.parquet`` row group by row group).

The covariance columns are named by position, not by name: names may contain commas, and
``cov[a,b,c]`` would then name both the entry of ``"a,b"`` and ``"c"`` and that of ``"a"`` and
``"b,c"`` (one column silently replacing the other).

The file appears only when the whole explanation is written: chunks go to a temporary file
beside ``output_path``, renamed over it at the end, so a failed call leaves an existing file
as it was.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from gpexplain._validation import check_finite_result

__all__ = ["FEATURE_NAMES_KEY", "check_output_path", "write_parquet"]

FEATURE_NAMES_KEY = b"gpexplain.feature_names"


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
            columns[f"cov[{i},{j}]"] = cov[:, i, j]
    if difference_variance is not None:
        columns["difference_variance"] = difference_variance
    if reference is not None:
        columns["baseline_prediction"] = reference
    return columns


def write_parquet(path: Path, chunks: Iterable[tuple], names: list[str], caller: str) -> Path:
    """Write the driver's per-chunk outputs to ``path`` as they arrive; return ``path``.

    Each chunk is checked finite before it is written (``FloatingPointError`` otherwise), so
    nothing non-finite reaches the file. The chunks go to a temporary file in ``path``'s
    folder, renamed to ``path`` once all are written; on any error it is removed and a file
    already at ``path`` is left untouched.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    # A unique name in the same folder (so the rename is atomic), created by the writer with
    # the permissions any new file gets.
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}.partial")
    metadata = {FEATURE_NAMES_KEY: json.dumps(list(names)).encode("utf-8")}
    writer, first_row = None, 0
    try:
        for outputs in chunks:
            check_finite_result(caller, *(output for output in outputs if output is not None))
            table = pa.table(_columns(outputs, first_row, names), metadata=metadata)
            if writer is None:
                writer = pq.ParquetWriter(partial, table.schema)
            writer.write_table(table)
            first_row += len(outputs[0])
        if writer is None:
            raise ValueError("X has no rows; there is nothing to write.")
        writer.close()
        os.replace(partial, path)
    except BaseException:
        if writer is not None:
            writer.close()
        partial.unlink(missing_ok=True)
        raise
    return path
