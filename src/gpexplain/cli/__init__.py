"""Command line: ``gpexplain explain``, ``demo``, ``report``, ``poe``, ``sensitivity`` and
``datasets``.

Files in, files out. One module per command; the stages they share (``reading``: read, select
and encode the table; ``stages``: fit and score; ``output``: write) are written once, so
every command that reads a table accepts the same file options. What each task does with its
target is a task object (``regression``, ``classification``, registered in ``tasks``); which
models, kernels, methods and games exist is read from the registries (``choices``).

Bad input ends with exit code 2 and a one-line message on stderr; everything else the
library raises is a bug and keeps its traceback.
"""

from gpexplain.cli.app import app

__all__ = ["app"]
