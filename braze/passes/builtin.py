"""The built-in passes; importing this module registers them."""

from . import canonicalize, cse, dce, fusion, layout, precision  # noqa: F401
