"""Saving and loading a module's blob store (weights) as one ``.npz`` file.

Handles may contain any character (ONNX names do), so arrays are stored
under their index and the handles in a separate ``__handles__`` array.
"""

from __future__ import annotations

import os
import zipfile

import numpy as np

from ..errors import ModelLoadError


def save_blobs(blobs: dict[str, np.ndarray], path: str) -> None:
    handles = list(blobs)
    arrays = {f"a{i}": np.ascontiguousarray(blobs[h]) for i, h in enumerate(handles)}
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        np.savez(f, __handles__=np.array(handles, dtype=str), **arrays)
    os.replace(tmp, path)


def load_blobs(path: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            handles = [str(h) for h in z["__handles__"]]
            return {h: z[f"a{i}"] for i, h in enumerate(handles)}
    except FileNotFoundError:
        raise ModelLoadError(f"{path}: no such weights file") from None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as e:
        raise ModelLoadError(f"{path}: not a braze weights file ({e})") from None
