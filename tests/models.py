"""Where the test models are: the tiny exports shipped in braze/data and the
light_* CNNs inside the onnx wheel."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx

DATA = Path(__file__).parent.parent / "braze" / "data"
TINY = ["bert-tiny", "vit-tiny", "mobilenetv2-tiny"]
LIGHT_DIR = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"
LIGHT = sorted(p.stem for p in LIGHT_DIR.glob("light_*.onnx"))


def tiny(name: str) -> Path:
    return DATA / f"{name}.onnx"


def light(name: str) -> Path:
    return LIGHT_DIR / f"{name}.onnx"


def assert_close(ours: dict, ref: dict) -> None:
    """Every output of ``ref`` within 1e-4 of its scale (max |ref|, at least 1) in ``ours``."""
    for name, expected in ref.items():
        scale = max(1.0, float(np.abs(expected).max()))
        err = float(np.abs(ours[name].astype(np.float64) - expected).max())
        assert err <= 1e-4 * scale, f"{name}: max abs error {err:.3e} (scale {scale:.3g})"
