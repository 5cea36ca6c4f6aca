"""Lowerings, one module per op family. Importing registers them all."""

from . import math, nn, reduce, tensor  # noqa: F401
from . import activation  # noqa: F401
from . import conv, norm, pool  # noqa: F401
from . import gather, resize  # noqa: F401
from . import layout  # noqa: F401
from . import attention  # noqa: F401
from . import quant  # noqa: F401
