"""Converters, one module per op family. Importing registers them all."""

from . import activation, constant, conv, gather, math, nn, norm, reduce, resize, tensor  # noqa: F401
from . import attention  # noqa: F401,E402
from . import quant  # noqa: F401,E402
