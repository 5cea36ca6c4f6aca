"""Artifacts: save, load, run. Imports tvm only when a model runs."""

from .. import threads  # noqa: F401  (sizes TVM's thread pool before TVM starts)
from .artifact import Artifact, load
from ..threads import set_spin

__all__ = ["Artifact", "load", "set_spin"]
