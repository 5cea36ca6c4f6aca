"""Where the test models are: the tiny exports shipped in braze/data and the
light_* CNNs inside the onnx wheel."""

from __future__ import annotations

import os
from pathlib import Path

import onnx

DATA = Path(__file__).parent.parent / "braze" / "data"
TINY = ["bert-tiny", "vit-tiny", "mobilenetv2-tiny"]
LIGHT_DIR = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"
LIGHT = sorted(p.stem for p in LIGHT_DIR.glob("light_*.onnx"))


def tiny(name: str) -> Path:
    return DATA / f"{name}.onnx"


def light(name: str) -> Path:
    return LIGHT_DIR / f"{name}.onnx"
