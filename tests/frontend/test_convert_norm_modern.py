"""RMSNormalization, GroupNormalization and RotaryEmbedding (decomposed by
braze/frontend/converters/norm.py) vs onnxruntime: braze's reference
interpreter, then the compiled model."""

import numpy as np
import pytest

from braze.errors import OnnxImportError
from braze.frontend import import_onnx
from compiled_check import check_compiled
from onnx_check import check_against_ort, parse, random_inputs


def model(opset: int, signature: str, body: str):
    return parse(f'<ir_version: 10, opset_import: ["" : {opset}]> g ({signature}) => (y) {{ {body} }}')


def check(opset: int, signature: str, body: str, feeds=None, tol=1e-5):
    m = model(opset, signature, body)
    feeds = {**random_inputs(m), **(feeds or {})}
    check_against_ort(m, feeds, rtol=tol, atol=tol)
    check_compiled(m, feeds, rtol=tol, atol=tol)


@pytest.mark.parametrize("x, scale, attrs, tol", [
    ("float[2,3,8]", "float[8]", "", 1e-5),
    ("float[2,3,8]", "float[3,8]", "<axis=1, epsilon=0.01>", 1e-5),
    ("float[2,3,8]", "float[1,8]", "<axis=-2>", 1e-5),
    ("float16[2,3,64]", "float16[64]", "", 2e-3),  # statistics in float32, result in float16
])
def test_rms_normalization(x, scale, attrs, tol):
    check(23, f"{x} x, {scale} s", f"y = RMSNormalization {attrs} (x, s)", tol=tol)


@pytest.mark.parametrize("x, groups, tol", [
    ("float[2,6,3,3]", 3, 1e-5),
    ("float[2,6,5]", 1, 1e-5),
    ("float[2,6,5]", 6, 1e-5),
    ("float16[2,4,16]", 2, 2e-3),
])
def test_group_normalization_per_channel(x, groups, tol):
    c = x.split("[")[1].split(",")[1]
    dtype = x.split("[")[0]
    check(21, f"{x} x, {dtype}[{c}] s, {dtype}[{c}] b",
          f"y = GroupNormalization <num_groups={groups}, epsilon=0.001> (x, s, b)", tol=tol)


def test_group_normalization_18_per_group():
    check(18, "float[2,6,4] x, float[3] s, float[3] b", "y = GroupNormalization <num_groups=3> (x, s, b)")


POSITIONS = {"p": np.array([[0, 1, 2], [7, 3, 5]], np.int64)}


@pytest.mark.parametrize("signature, attrs, feeds", [
    ("float[2,2,3,8] x, float[8,4] c, float[8,4] s, int64[2,3] p", "", POSITIONS),
    ("float[2,3,16] x, float[8,2] c, float[8,2] s, int64[2,3] p",
     "<num_heads=2, interleaved=1, rotary_embedding_dim=4>", POSITIONS),  # partial, interleaved
    ("float[2,3,16] x, float[8,3] c, float[8,3] s, int64[2,3] p", "<num_heads=2, rotary_embedding_dim=6>",
     POSITIONS),
    ("float[2,2,3,8] x, float[2,3,4] c, float[2,3,4] s", "<interleaved=1>", {}),  # caches already gathered
])
def test_rotary_embedding(signature, attrs, feeds):
    inputs = "x, c, s, p" if "p" in feeds else "x, c, s"
    check(23, signature, f"y = RotaryEmbedding {attrs} ({inputs})", feeds)


@pytest.mark.parametrize("opset, signature, body, attribute", [
    (23, "float[2,8] x, float[8] s", "y = RMSNormalization <stash_type=11> (x, s)", "stash_type=11"),
    (21, "float[2,4,3] x, float[4] s, float[4] b", "y = GroupNormalization <num_groups=3> (x, s, b)",
     "num_groups=3"),
    (23, "float[1,2,3,8] x, float[1,3,2] c, float[1,3,2] s",
     "y = RotaryEmbedding <rotary_embedding_dim=3> (x, c, s)", "rotary_embedding_dim=3"),
    (23, "float[1,3,8] x, float[1,3,4] c, float[1,3,4] s", "y = RotaryEmbedding (x, c, s)", "num_heads=0"),
])
def test_unsupported_attribute_is_refused(opset, signature, body, attribute):
    with pytest.raises(OnnxImportError, match=attribute):
        import_onnx(model(opset, signature, body))
