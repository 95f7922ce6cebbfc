"""What every command shares: the one-line error exit, console lines, warnings, output files.

Bad input ends with exit code 2 and a one-line message on stderr (``fail``); everything else
the library raises is a bug and keeps its traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import numpy as np
import typer
from rich.console import Console
from rich.progress import Progress

__all__ = [
    "HOLDOUT_FRACTION",
    "INTERVAL_LEVEL",
    "advance",
    "fail",
    "finite_or_none",
    "make_output_directory",
    "say",
    "show_warnings",
    "write_json",
]

HOLDOUT_FRACTION = 0.2
INTERVAL_LEVEL = 0.95


def fail(message: str) -> NoReturn:
    """Print ``Error: <message>`` as one line on stderr and exit with code 2."""
    typer.echo("Error: " + " ".join(str(message).split()).rstrip(".") + ".", err=True)
    raise typer.Exit(code=2)


def say(console: Console, text: str) -> None:
    """Print ``text`` as it is (no Rich markup or highlighting; long lines wrap softly)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def finite_or_none(value) -> float | None:
    """``float(value)``, or None where it is not finite (JSON has no inf or NaN)."""
    value = float(value)
    return value if np.isfinite(value) else None


def make_output_directory(out: Path) -> None:
    """Create ``out`` (and its parents); an OS error exits with code 2."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        fail(f"cannot create output directory {str(out)!r}: {error.strerror or error}")


def write_json(path: Path, payload: dict, **options) -> None:
    """``payload`` as indented JSON (no NaN) with a final newline."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, indent=2, allow_nan=False, **options)
        handle.write("\n")


def show_warnings(caught, console: Console) -> None:
    """One line per distinct user-facing warning (UserWarning, RuntimeWarning)."""
    shown = set()
    for record in caught:
        if not issubclass(record.category, UserWarning | RuntimeWarning):
            continue  # DeprecationWarning and friends are for developers
        message = " ".join(str(record.message).split())
        if message not in shown:
            shown.add(message)
            say(console, f"Warning: {message}")


def advance(progress: Progress, task):
    """Progress callback ``(step, total)`` for one Rich task."""

    def update(step: int, total: int) -> None:
        progress.update(task, completed=step, total=total)

    return update
