"""braze's version (pyproject.toml has the same): recorded in every artifact."""

__version__ = "0.1.0"
