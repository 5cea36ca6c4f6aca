"""Converters, one module per op family. Importing registers them all."""

from . import activation, attention, constant, control, conv, gather, math, nn, norm  # noqa: F401
from . import data_dependent, quant, recurrent, reduce, resize, spectral, tensor  # noqa: F401
