"""Converters, one module per op family. Importing registers them all."""

from . import activation, constant, conv, gather, math, nn, reduce, resize, tensor  # noqa: F401
