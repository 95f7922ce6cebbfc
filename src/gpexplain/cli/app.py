"""The Typer application: one command per module of this package, and ``--version``."""

from __future__ import annotations

from typing import Annotated

import typer

from gpexplain._version import __version__
from gpexplain.cli import datasets, demo, explain, poe, report, sensitivity

__all__ = ["app"]

app = typer.Typer(
    name="gpexplain",
    help="Fit a Gaussian process to a table and explain its predictions, with uncertainty.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
# In the order ``gpexplain --help`` lists them.
for name, module in (("explain", explain), ("demo", demo), ("report", report), ("poe", poe),
                     ("sensitivity", sensitivity), ("datasets", datasets)):
    app.command(name=name)(module.command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpexplain {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Fit a Gaussian process to a table and explain its predictions, with uncertainty."""
