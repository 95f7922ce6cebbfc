"""``python -m gpexplain.cli``: the ``gpexplain`` command."""

from gpexplain.cli.app import app

app()
