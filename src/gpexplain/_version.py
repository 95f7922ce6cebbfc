"""The package version, in a module of its own so that persistence can record it without
importing the package (which would import persistence back)."""

__version__ = "0.2.0"
