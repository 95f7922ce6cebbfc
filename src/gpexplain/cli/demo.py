"""``gpexplain demo``: ``explain`` on a bundled data set, with the default options."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from gpexplain.cli.choices import check_choice
from gpexplain.cli.common import fail
from gpexplain.cli.explain import Request, run
from gpexplain.cli.options import ForceOption, OutOption
from gpexplain.datasets import load_dataset

__all__ = ["command"]


def command(
    out: OutOption = Path("gpexplain-demo"),
    force: ForceOption = False,
    dataset: Annotated[str, typer.Option(help="Bundled data set (see gpexplain datasets).")] = (
        "diabetes"
    ),
) -> None:
    """Explain rows 0:20 of a bundled data set (default: scikit-learn's scaled diabetes)."""
    try:
        X, y = load_dataset(dataset)
    except (ValueError, TypeError) as error:
        fail(str(error))
    choice = check_choice("exact", "ard", "auto", 0, None)
    run(pd.concat([X, y], axis=1),
        Request(f"bundled:{dataset}", str(y.name), "0:20", "mean", choice, out, True,
                force=force))
