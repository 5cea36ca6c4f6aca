"""Lowerings, one module per op family. Importing registers them all."""

from . import math, nn, reduce, tensor  # noqa: F401
