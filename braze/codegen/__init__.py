"""IR -> TVM: lowerings, kernels, Relax assembly, build. Imports tvm."""

from .. import threads  # noqa: F401  (must run before tvm starts its pool)
from .build import build
from .compiled import Compiled

__all__ = ["Compiled", "build"]
