"""Every op definition. Importing this package registers them all."""

from . import activation, attention, builtin, control, conv, gather, layout, math, nn, norm  # noqa: F401
from . import pool, quant, reduce, resize, tensor  # noqa: F401
