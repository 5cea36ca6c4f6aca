"""The built-in passes; importing this module registers them."""

from . import attention, canonicalize, cse, dce, fusion, layout, precision, quant  # noqa: F401
