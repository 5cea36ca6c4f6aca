"""Helpers for lowering tests: compile an ONNX model with braze and compare
its outputs with onnxruntime's."""

from __future__ import annotations

import numpy as np

from braze.compiler import compile as braze_compile
from onnx_check import parse, random_inputs, run_ort


def graph(signature: str, nodes: list[str], outputs: list[str], opset: int = 17, constants: str = "") -> str:
    """ONNX text of a model with the given inputs, nodes and outputs;
    ``constants``: initializers in ONNX text syntax, e.g. ``int64[1] k = {3}``."""
    constants = f"<{constants}>" if constants else ""
    return (f'<ir_version: 8, opset_import: ["" : {opset}]> g ({signature}) => ({", ".join(outputs)}) '
            f'{constants} {{ {" ".join(nodes)} }}')


def check_compiled(text_or_model, feeds=None, rtol=1e-5, atol=1e-5) -> None:
    """Compile the model with braze (level 0: one kernel per op), run it and
    assert that every output matches onnxruntime's in shape, dtype and value."""
    model = parse(text_or_model) if isinstance(text_or_model, str) else text_or_model
    feeds = feeds if feeds is not None else random_inputs(model)
    got = braze_compile(model, level=0).run(feeds)
    for name, expected in run_ort(model, feeds).items():
        assert got[name].shape == expected.shape, f"{name}: shape {got[name].shape} vs {expected.shape}"
        assert got[name].dtype == expected.dtype, f"{name}: dtype {got[name].dtype} vs {expected.dtype}"
        np.testing.assert_allclose(got[name], expected, rtol=rtol, atol=atol, err_msg=name)


def check_compiled_vs_reference(text_or_model, feeds=None, rtol=1e-5, atol=1e-5) -> None:
    """As check_compiled, against braze's numpy references (for what
    onnxruntime refuses, or does otherwise than numpy, e.g. NaN in max)."""
    from braze.frontend import import_onnx
    from braze.ir.interpret import interpret

    model = parse(text_or_model) if isinstance(text_or_model, str) else text_or_model
    feeds = feeds if feeds is not None else random_inputs(model)
    got = braze_compile(model, level=0).run(feeds)
    for name, expected in interpret(import_onnx(model), feeds).items():
        assert got[name].shape == expected.shape, f"{name}: shape {got[name].shape} vs {expected.shape}"
        assert got[name].dtype == expected.dtype, f"{name}: dtype {got[name].dtype} vs {expected.dtype}"
        np.testing.assert_allclose(got[name], expected, rtol=rtol, atol=atol, err_msg=name)
