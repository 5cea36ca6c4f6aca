"""braze's IR: MLIR's nouns at Python scale. Imports neither onnx nor tvm."""

from .builder import Builder, const_array, constant_value
from .core import Block, BlockArgument, Func, Module, Operation, OpResult, Region, Value, control_regions, region_module
from .parser import parse_module
from .printer import print_module, print_op
from .registry import Kind, OpDef, all_ops, lookup, register
from .types import DenseElements, DenseResource, Location, TensorType
from .verifier import verify
from .blobs import load_blobs, save_blobs

__all__ = [
    "control_regions", "region_module",
    "Block", "BlockArgument", "Builder", "DenseElements", "DenseResource", "Func", "Kind",
    "Location", "Module", "OpDef", "OpResult", "Operation", "Region", "TensorType", "Value",
    "all_ops", "const_array", "constant_value", "load_blobs", "lookup", "parse_module",
    "print_module", "print_op", "register", "save_blobs", "verify",
]
