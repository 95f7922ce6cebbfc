"""What every command shares: the one-line error exit, console lines, warnings, output files.

Bad input ends with exit code 2 and a one-line message on stderr (``fail``); everything else
the library raises is a bug and keeps its traceback.

Output folders are written whole or not at all: ``check_output_directory`` refuses an ``--out``
before any work, and ``writing_into`` gives the writers a fresh folder beside it that replaces
``--out`` only when every file is written. A folder already there is replaced whole (no file of
an earlier run stays to mix with this one's) when it is a previous gpexplain output, recognised
by its ``summary.json``; any other non-empty folder needs ``--force``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import numpy as np
import typer
from rich.console import Console
from rich.progress import Progress

__all__ = [
    "HOLDOUT_FRACTION",
    "INTERVAL_LEVEL",
    "PlainProgress",
    "advance",
    "check_output_directory",
    "fail",
    "finite_or_none",
    "progress_display",
    "say",
    "show_warnings",
    "write_json",
    "writing_into",
]

HOLDOUT_FRACTION = 0.2
INTERVAL_LEVEL = 0.95


def fail(message: str) -> NoReturn:
    """Print ``Error: <message>`` as one line on stderr and exit with code 2."""
    line = " ".join(str(message).split()).rstrip(".")
    typer.echo("Error: " + line + ("" if line.endswith(("?", "!")) else "."), err=True)
    raise typer.Exit(code=2)


def say(console: Console, text: str) -> None:
    """Print ``text`` as it is (no Rich markup or highlighting; long lines wrap softly)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def finite_or_none(value) -> float | None:
    """``float(value)``, or None where it is not finite (JSON has no inf or NaN)."""
    value = float(value)
    return value if np.isfinite(value) else None


def _is_gpexplain_output(folder: Path) -> bool:
    """Whether ``folder`` holds a ``summary.json`` that gpexplain wrote (it records the
    version)."""
    try:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and "gpexplain_version" in summary


def check_output_directory(out: Path, force: bool = False, keep: tuple = ()) -> None:
    """Refuse ``--out`` before any work (exit code 2 naming the reason), and create its parent.

    Parameters
    ----------
    out : pathlib.Path
        The ``--out`` folder. Absent, empty, or a previous gpexplain output (its
        ``summary.json`` records ``gpexplain_version``) are accepted: the run replaces it whole.
    force : bool
        Also accept a non-empty folder of other files (``--force``): they are deleted when the
        run's folder replaces it.
    keep : tuple of pathlib.Path or None
        The run's other paths (its data file, ``--model-from``, ``--save-model``): refused
        when inside ``out``, as is the current directory, since replacing ``out`` would delete
        them.
    """
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        fail(f"--out {str(out)!r} is not a folder (a file or a link); give a folder")
    target = out.resolve()
    for path in (*keep, Path.cwd()):
        if path is not None and target in (Path(path).resolve(), *Path(path).resolve().parents):
            fail(f"--out {str(out)!r} contains {str(path)!r}, which replacing the output folder "
                 "would delete; give another --out")
    if out.is_dir() and any(out.iterdir()) and not force and not _is_gpexplain_output(out):
        fail(f"--out {str(out)!r} holds files that are not a gpexplain output (no gpexplain "
             "summary.json); give a new or empty folder, or --force to replace it and "
             "everything in it")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        fail(f"cannot create output directory {str(out.parent)!r}: {error.strerror or error}")


@contextmanager
def writing_into(out: Path) -> Iterator[Path]:
    """A fresh folder beside ``out`` to write a run's files into; it replaces ``out`` (whole)
    when the block ends without error, and is removed otherwise (``out`` stays as it was).

    Call ``check_output_directory`` first. An OS error while writing or moving exits with
    code 2.
    """
    staging = out.with_name(f".{out.name}.{uuid.uuid4().hex}.partial")
    try:
        staging.mkdir()
        yield staging
        if out.exists():
            earlier = out.with_name(f".{out.name}.{uuid.uuid4().hex}.old")
            os.replace(out, earlier)
            try:
                os.replace(staging, out)
            except OSError:
                os.replace(earlier, out)
                raise
            shutil.rmtree(earlier, ignore_errors=True)
        else:
            os.replace(staging, out)
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        fail(f"cannot write the output folder {str(out)!r}: {error.strerror or error}")
    except BaseException:  # a failed write or an interrupt: nothing half-written stays
        shutil.rmtree(staging, ignore_errors=True)
        raise


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


class PlainProgress:
    """Progress as plain lines, for a stderr that is not a terminal (a log file, a pipe, a
    batch job).

    Rich's live bars print nothing there until the run ends, so a job killed mid-run left an
    empty log. This prints a line when a stage starts, at most one line every ``every``
    seconds while it runs, and one when it ends. It offers the part of ``rich.progress.Progress``
    that the commands use (``add_task``, ``update``, ``stop``, a context manager).

    Parameters
    ----------
    console : rich.console.Console
        Where the lines go.
    every : float, default 5.0
        Fewest seconds between two lines of one stage.
    """

    def __init__(self, console: Console, every: float = 5.0):
        self.console, self.every = console, every
        self._tasks: list[dict] = []

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def add_task(self, description: str, total: float | None = None) -> int:
        """Print ``<description> ...`` and return the stage's id for ``update``."""
        self._tasks.append({"description": description, "start": time.monotonic(),
                            "shown": time.monotonic(), "done": False})
        say(self.console, f"{description} ...")
        return len(self._tasks) - 1

    def update(self, task: int, completed: float, total: float | None = None) -> None:
        """Record progress; print it if ``every`` seconds passed since the stage's last line,
        and print ``done`` once when ``completed`` reaches ``total``."""
        state, now = self._tasks[task], time.monotonic()
        elapsed = f"{now - state['start']:.0f} s"
        if total and completed >= total:
            if not state["done"]:
                state["done"] = True
                say(self.console, f"{state['description']}: done ({elapsed})")
        elif now - state["shown"] >= self.every:
            state["shown"] = now
            share = f"{100 * completed / total:.0f}%" if total else f"step {completed:g}"
            say(self.console, f"{state['description']}: {share} ({elapsed})")

    def stop(self) -> None:
        """Nothing to take down: the lines are already printed."""


def progress_display(console: Console, *columns) -> Progress | PlainProgress:
    """Rich's live bars (``columns``) on a terminal or in Jupyter, plain lines elsewhere."""
    if console.is_terminal or console.is_jupyter:
        return Progress(*columns, console=console)
    return PlainProgress(console)


def advance(progress: Progress | PlainProgress, task):
    """Progress callback ``(step, total)`` for one task of ``progress``."""

    def update(step: int, total: int) -> None:
        progress.update(task, completed=step, total=total)

    return update
