"""Command-line options several commands share, declared once.

The file options (``DATA``, ``--target``, ``--header/--no-header``, ``--names``,
``--decimal``, ``--missing``, ``--drop``) are those of the shared read stage (``reading``), so
``explain``, ``sensitivity`` and ``poe`` accept the same files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpexplain.cli.choices import MULTI_OUTPUT_CHOICES

__all__ = [
    "DataArgument",
    "DecimalOption",
    "DropOption",
    "ForceOption",
    "HeaderOption",
    "MissingOption",
    "MultiOutputOption",
    "NamesOption",
    "OutOption",
    "RankOption",
    "RowsOption",
    "SeedOption",
    "TargetOption",
]

DataArgument = Annotated[
    str,
    typer.Argument(
        metavar="DATA",
        help="CSV or whitespace-separated text (delimiter detected), Excel or Parquet file.",
    ),
]
TargetOption = Annotated[
    str, typer.Option(help="Target column: its name, or its 0-based position (-1: last).")
]
HeaderOption = Annotated[
    bool | None,
    typer.Option(
        "--header/--no-header",
        help="Whether the first line names the columns (default: detected where unambiguous, "
        "else yes).",
        show_default=False,
    ),
]
NamesOption = Annotated[
    str | None,
    typer.Option(help="Comma-separated column names (default without a header: x0, x1, ...)."),
]
DecimalOption = Annotated[
    str,
    typer.Option(
        help="Decimal mark of a text file: auto (a decimal comma, as R's write.csv2 writes, is "
        "detected), '.' or ','.",
    ),
]
MissingOption = Annotated[
    str,
    typer.Option(help="Missing cells (empty, NA, NaN, null, ?): error stops, drop drops those "
                 "rows."),
]
DropOption = Annotated[
    str | None,
    typer.Option(help="Comma-separated columns to leave out (names or 0-based positions)."),
]
RowsOption = Annotated[
    str, typer.Option(help="Rows to explain: START:STOP (0-based, STOP excluded), 3,7,9 or all.")
]
SeedOption = Annotated[int, typer.Option(help="Seed of the optimiser restarts and the split.")]
OutOption = Annotated[
    Path,
    typer.Option(help="Output directory, written whole at the end of the run (a previous "
                 "gpexplain output there is replaced, none of its files kept)."),
]
ForceOption = Annotated[
    bool,
    typer.Option("--force", help="Replace --out even when it holds other files (deleted)."),
]
MultiOutputOption = Annotated[
    str,
    typer.Option(
        help=f"Several --target columns: {MULTI_OUTPUT_CHOICES[0]} (one GP per target), icm "
        "(one intrinsic coregionalisation model of all of them, --kernel ard; explain writes "
        "the correlation of different targets' attributions to output_correlations.csv) or "
        "lmc (a linear model of coregionalisation: --n-components such terms, each with its "
        "own lengthscales).",
    ),
]
NComponentsOption = Annotated[
    int | None,
    typer.Option(
        help="--multi-output lmc only: the number Q of its terms B^q k_q(x, x'), each with its "
        "own lengthscales (default 2; 1 is the icm).",
    ),
]
RankOption = Annotated[
    int | None,
    typer.Option(
        help="--multi-output icm or lmc only: the rank r of W in its coregionalisation matrix "
        "(each term's, for lmc) B = W "
        "W^T + diag(v), 1 to the number of targets (default: that number, full rank; 1: the "
        "targets share one latent function besides their own parts).",
    ),
]
