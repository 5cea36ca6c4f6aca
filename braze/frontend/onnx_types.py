"""ONNX's element types and node names as braze's importer spells them."""

from __future__ import annotations

import onnx

from ..errors import OnnxImportError

#: the names of ONNX's default domain
DEFAULT_DOMAINS = ("", "ai.onnx")


def node_name(node, index: int) -> str:
    """The node's name, or a stable synthetic one: ``OpType_<index>``."""
    return node.name or f"{node.op_type}_{index}"


_ONNX_DTYPES = {
    onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.FLOAT16: "f16", onnx.TensorProto.DOUBLE: "f64",
    onnx.TensorProto.BFLOAT16: "bf16", onnx.TensorProto.BOOL: "i1",
    onnx.TensorProto.INT8: "i8", onnx.TensorProto.INT16: "i16", onnx.TensorProto.INT32: "i32",
    onnx.TensorProto.INT64: "i64", onnx.TensorProto.UINT8: "ui8", onnx.TensorProto.UINT16: "ui16",
    onnx.TensorProto.UINT32: "ui32", onnx.TensorProto.UINT64: "ui64",
}


_ONNX_FROM_IR = {v: k for k, v in _ONNX_DTYPES.items()}


def onnx_dtype(elem_type: int, what: str) -> str:
    if elem_type not in _ONNX_DTYPES:
        name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() else elem_type
        raise OnnxImportError(f"{what} has element type {name}, which braze does not support")
    return _ONNX_DTYPES[elem_type]
