"""Every op definition. Importing this package registers them all."""

from . import builtin, math, nn, reduce, tensor  # noqa: F401
