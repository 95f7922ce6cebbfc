"""The real data sets of the additive-GP Shapley benchmarks.

Imported by ``oak_accuracy.py`` (run as a script, so this directory is on ``sys.path``).
"""

from __future__ import annotations

from _common import data_path


# -- real data sets ($GPEXPLAIN_DATA_DIR, see its README for provenance) -------------------------
def load_auto_mpg():
    """Auto MPG as in the additive-GP literature: ``autompg.mat``, 392 complete rows.

    ``autompg.txt`` has the same rows plus 6 whose horsepower is NaN; the .mat is the 392-row
    version used by Duvenaud et al. (2011) and Lu et al. (2022). Returns X (7 features) and
    y = mpg.
    """
    import pandas as pd
    from scipy.io import loadmat

    contents = loadmat(data_path("auto_mpg", "autompg.mat"))
    names = [str(entry[0]) for entry in contents["varNames"].ravel()]
    values = contents["X"].astype(float)
    if names[0] != "mpg":  # the loader relies on the file's documented column order
        raise ValueError(f"autompg.mat: expected 'mpg' as the first variable, got {names}")
    return pd.DataFrame(values[:, 1:], columns=names[1:]), values[:, 0]


def load_concrete():
    """Concrete compressive strength (1030 rows): X (8 mixture/age features), y in MPa."""
    import pandas as pd

    frame = pd.read_csv(data_path("concrete", "Concrete_Data.csv"))
    # The UCI header spells out units; keep the component name only.
    names = [column.split("(")[0].strip().lower().replace(" ", "_") for column in frame.columns]
    frame.columns = names
    return frame.iloc[:, :-1], frame.iloc[:, -1].to_numpy(dtype=float)
