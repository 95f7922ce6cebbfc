"""Bundled real data sets and tabular file reading.

``list_datasets`` and ``load_dataset`` give the real regression data sets shipped with the
package (provenance and licences in ``gpexplain/datasets/data/PROVENANCE.md``);
``read_table`` reads a user's CSV (delimiter detected) or Parquet file with errors that name
the file.
"""

from gpexplain.datasets._bundled import list_datasets, load_dataset
from gpexplain.datasets._tables import read_table

__all__ = ["list_datasets", "load_dataset", "read_table"]
