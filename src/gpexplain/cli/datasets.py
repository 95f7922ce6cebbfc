"""``gpexplain datasets``: the bundled data sets, as a table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from gpexplain.datasets import list_datasets

__all__ = ["command"]


def command() -> None:
    """List the bundled data sets."""
    frame = list_datasets()
    table = Table(title="Bundled data sets (gpexplain demo --dataset NAME)")
    for column in frame.columns:
        numeric = column in ("rows", "features")
        table.add_column(
            column,
            justify="right" if numeric else "left",
            no_wrap=numeric or column == "name",
            overflow="fold",  # long DOIs break rather than vanish behind an ellipsis
        )
    for record in frame.itertuples(index=False):
        table.add_row(*(str(value) for value in record))
    Console().print(table)
