"""Converters, one module per op family. Importing registers them all."""

from . import activation, attention, constant, conv, gather, math, nn, norm  # noqa: F401
from . import quant, reduce, resize, tensor  # noqa: F401
