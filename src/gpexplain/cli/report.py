"""``gpexplain report``: one self-contained HTML report of an ``explain`` (or ``sensitivity``)
output directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gpexplain.cli.common import fail, say

__all__ = ["command"]


def command(
    out_dir: Annotated[
        Path, typer.Argument(metavar="OUT_DIR",
                             help="Output directory of gpexplain explain or sensitivity.")
    ],
    output: Annotated[
        Path | None, typer.Option(help="HTML file to write (default OUT_DIR/report.html).")
    ] = None,
) -> None:
    """Write one self-contained HTML report of an explain (or sensitivity) output directory."""
    # matplotlib loads with the first figure, not with every command (gpexplain --version)
    from gpexplain.report import write_report
    try:
        path = write_report(out_dir, output)
    except ValueError as error:
        fail(str(error))
    except OSError as error:
        fail(f"cannot write the report: {error.strerror or error}")
    say(Console(), f"Wrote {path}")
