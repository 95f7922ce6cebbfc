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

**Several outputs** (a ``MultiOutputPosterior``; output names in the metadata, key
``gpexplain.output_names``, a JSON list): still one row per query point, with
``prediction[<output>]`` per output, ``mean[<output>/<feature>]`` in output-major order (every
feature of the first output, then of the second, ...), ``cov[<p>,<q>]`` for p <= q by position
``p = i D + a`` over those stacked (output i, feature a) values, i.e. the joint covariance at
each point, between outputs too (an ICM's or LMC's covariance across outputs is kept), and
``difference_variance[<output>]`` and ``baseline_prediction[<output>]``. For independent
outputs (metadata ``gpexplain.independent_outputs`` is ``true``) the columns between different
outputs are left out: those covariances are zero by the model (not computed, and writing them
would multiply the covariance columns by the number of outputs). A ``mean`` column name that
two (output, feature) pairs would share (slashes in both names) is refused before any work.

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

__all__ = ["FEATURE_NAMES_KEY", "INDEPENDENT_OUTPUTS_KEY", "OUTPUT_NAMES_KEY",
           "check_output_path", "write_parquet"]

FEATURE_NAMES_KEY = b"gpexplain.feature_names"
OUTPUT_NAMES_KEY = b"gpexplain.output_names"
INDEPENDENT_OUTPUTS_KEY = b"gpexplain.independent_outputs"


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


class _Layout:
    """The columns of one explanation (module docstring): one output (``output_names`` None)
    or several; names and positions fixed once, before any chunk.

    Raises
    ------
    ValueError
        Two (output, feature) pairs whose ``mean`` columns would share a name.
    """

    def __init__(self, names: list[str], output_names: list[str] | None, independent: bool):
        self.output_names = output_names
        self.value_names = (list(names) if output_names is None else
                            [f"{output}/{name}" for output in output_names for name in names])
        if len(set(self.value_names)) != len(self.value_names):
            shared = sorted({name for name in self.value_names
                             if self.value_names.count(name) > 1})
            raise ValueError(f"the columns mean[{shared[0]}] of two (output, feature) pairs "
                             "would share a name (slashes in output and feature names): "
                             "rename the outputs or the features.")
        p, q = np.triu_indices(len(self.value_names))
        if independent:  # zero between outputs by the model: within-output pairs only
            within = p // len(names) == q // len(names)
            p, q = p[within], q[within]
        self.cov_pairs = list(zip(p.tolist(), q.tolist(), strict=True))
        self.metadata = {FEATURE_NAMES_KEY: json.dumps(list(names)).encode("utf-8")}
        if output_names is not None:
            self.metadata[OUTPUT_NAMES_KEY] = json.dumps(list(output_names)).encode("utf-8")
            self.metadata[INDEPENDENT_OUTPUTS_KEY] = json.dumps(bool(independent)).encode()

    def per_output(self, name: str, values: np.ndarray) -> dict[str, np.ndarray]:
        """``name`` of one output (values (m,)), or ``name[<output>]`` of each ((m, t))."""
        if self.output_names is None:
            return {name: values}
        return {f"{name}[{output}]": values[:, k] for k, output in enumerate(self.output_names)}

    def columns(self, outputs: tuple, first_row: int) -> dict[str, np.ndarray]:
        """The columns of one chunk of the driver's outputs (mean (m, D) or (m, t, D), cov
        (m, D, D) or (m, t, D, t, D) or None, prediction, reference and difference variance
        (m,) or (m, t) or None)."""
        mean, cov, prediction, reference, difference_variance = outputs
        values = mean.reshape(len(mean), len(self.value_names))
        columns = {"row": np.arange(first_row, first_row + len(mean))}
        columns |= self.per_output("prediction", prediction)
        columns |= {f"mean[{name}]": values[:, p] for p, name in enumerate(self.value_names)}
        if cov is not None:
            flat = cov.reshape(len(mean), values.shape[1], values.shape[1])
            columns |= {f"cov[{p},{q}]": flat[:, p, q] for p, q in self.cov_pairs}
        if difference_variance is not None:
            columns |= self.per_output("difference_variance", difference_variance)
        if reference is not None:
            columns |= self.per_output("baseline_prediction", reference)
        return columns


def write_parquet(path: Path, chunks: Iterable[tuple], names: list[str], caller: str, *,
                  output_names: list[str] | None = None, independent: bool = False) -> Path:
    """Write the driver's per-chunk outputs to ``path`` as they arrive; return ``path``.

    Parameters
    ----------
    path : pathlib.Path
        From ``check_output_path``.
    chunks : iterable of tuple
        Per chunk of m points: mean, cov (or None), prediction, reference (or None) and
        difference variance (or None); shapes (m, D), (m, D, D), (m,), (m,), (m,) for one
        output, (m, t, D), (m, t, D, t, D), (m, t), (m, t), (m, t) for ``output_names``.
    names : list of str
        The D feature (value) names.
    caller : str
        Public function name for error messages.
    output_names : list of str, optional
        The t outputs (the multi-output layout of the module docstring); None: one output.
    independent : bool, default False
        Independent outputs: the covariance columns between outputs are left out.

    Each chunk is checked finite before it is written (``FloatingPointError`` otherwise), so
    nothing non-finite reaches the file. The chunks go to a temporary file in ``path``'s
    folder, renamed to ``path`` once all are written; on any error it is removed and a file
    already at ``path`` is left untouched.

    Raises
    ------
    ValueError
        X has no rows, or ``mean`` column names that two (output, feature) pairs would share
        (before any chunk is computed).
    FloatingPointError
        A non-finite value in a chunk.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    layout = _Layout(names, output_names, independent)
    # A unique name in the same folder (so the rename is atomic), created by the writer with
    # the permissions any new file gets.
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}.partial")
    writer, first_row = None, 0
    try:
        for outputs in chunks:
            check_finite_result(caller, *(output for output in outputs if output is not None))
            table = pa.table(layout.columns(outputs, first_row), metadata=layout.metadata)
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
