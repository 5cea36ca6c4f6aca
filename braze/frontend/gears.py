"""Gears: the shapes one artifact is compiled for (docs/usage.md, "Dynamic shapes").

A model exported with dynamic axes names them (``B``, ``S``, ...) or leaves
them unnamed. A gear binds every dynamic dimension to one value; the
artifact holds one compiled graph per gear and runs the gear whose input
shapes match. Three ways to list them, as Ascend's ATC does:

- ``dynamic_batch="1,2,4,8"``: the leading dimension of every input;
- ``dynamic_dims="B=1,4;S=32,64"``: named dimensions, every combination
  (the product of the lists);
- ``gears="B=1,S=32;B=4,S=128"``: the combinations themselves.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import onnx

from ..errors import DynamicShapeError
from ..ir import Module
from .importer import import_onnx

#: At most this many gears in one artifact (ATC's bound too).
MAX_GEARS = 100
#: The name ``dynamic_batch`` gives the leading dimension.
BATCH = "batch"


@dataclass(frozen=True)
class Gear:
    """One binding of the dynamic dimensions: ``(("B", 4), ("S", 128))``."""

    dims: tuple[tuple[str, int], ...]

    @property
    def name(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.dims)

    def to_dict(self) -> dict[str, int]:
        return dict(self.dims)


def parse_gears(model: onnx.ModelProto, dynamic_batch=None, dynamic_dims=None, gears=None) -> list[Gear]:
    """The gears the options ask for (exactly one of the three), checked
    against the model's dynamic dimensions; a DynamicShapeError says what
    is wrong and what the model's dynamic dimensions are."""
    given = [n for n, v in (("--dynamic-batch", dynamic_batch), ("--dynamic-dims", dynamic_dims),
                            ("--gears", gears)) if v is not None]
    if len(given) != 1:
        raise DynamicShapeError(f"give one of --dynamic-batch, --dynamic-dims and --gears, not {' and '.join(given)}")
    if dynamic_batch is not None:
        values = _values(dynamic_batch, "--dynamic-batch")
        found = [Gear(((BATCH, v),)) for v in values]
    elif dynamic_dims is not None:
        lists = _named_lists(dynamic_dims)
        found = [Gear(tuple(zip(lists, combo))) for combo in itertools.product(*lists.values())]
    else:
        found = _explicit(gears)
    if len(found) > MAX_GEARS:
        raise DynamicShapeError(f"{len(found)} gears; an artifact holds at most {MAX_GEARS} (3-4 is typical)")
    if len(set(found)) != len(found):
        raise DynamicShapeError(f"a gear is listed twice: {', '.join(g.name for g in found)}")
    names = {k for g in found for k, _ in g.dims}
    dynamic = dynamic_dims_of(model)
    if names != {BATCH}:
        unknown = sorted(names - {name for _, _, name in dynamic if name})
        if unknown:
            raise DynamicShapeError(f"the model has no dynamic dimension named {', '.join(unknown)} "
                                    f"(its dynamic dimensions: {_describe(dynamic)})")
    for g in found:
        gear_shapes(model, g)  # every dynamic dimension bound, or the error says which is not
    return found


def import_gears(model: onnx.ModelProto, gears: list[Gear]) -> list[tuple[Gear, Module]]:
    """The model imported once per gear, each with that gear's input shapes."""
    return [(g, import_onnx(model, gear_shapes(model, g))) for g in gears]


def dynamic_dims_of(model: onnx.ModelProto) -> list[tuple[str, int, str]]:
    """(input, axis, name or "") of every dynamic input dimension."""
    weights = {t.name for t in model.graph.initializer}
    out = []
    for inp in model.graph.input:
        if inp.name in weights or not inp.type.HasField("tensor_type"):
            continue
        for axis, d in enumerate(inp.type.tensor_type.shape.dim):
            if not d.HasField("dim_value"):
                out.append((inp.name, axis, d.dim_param))
    return out


def gear_shapes(model: onnx.ModelProto, gear: Gear) -> dict[str, tuple[int, ...]]:
    """The input shapes of one gear (what ``--input-shape`` would bind)."""
    values = gear.to_dict()
    weights = {t.name for t in model.graph.initializer}
    shapes = {}
    for inp in model.graph.input:
        if inp.name in weights or not inp.type.HasField("tensor_type"):
            continue
        dims = []
        for axis, d in enumerate(inp.type.tensor_type.shape.dim):
            if d.HasField("dim_value"):
                if BATCH in values and axis == 0 and d.dim_value > 0:
                    raise DynamicShapeError(f"--dynamic-batch: input '{inp.name}' has a fixed batch of "
                                            f"{d.dim_value}; its leading dimension must be dynamic")
                dims.append(d.dim_value)
            elif BATCH in values and axis == 0:
                dims.append(values[BATCH])
            elif d.dim_param in values:
                dims.append(values[d.dim_param])
            else:
                label = f"'{d.dim_param}'" if d.dim_param else "unnamed"
                raise DynamicShapeError(f"gear {gear.name}: input '{inp.name}' dimension {axis} ({label}) "
                                        f"is dynamic and not bound by the gear (the model's dynamic "
                                        f"dimensions: {_describe(dynamic_dims_of(model))})")
        shapes[inp.name] = tuple(dims)
    return shapes


def _values(text, option: str) -> list[int]:
    if isinstance(text, (list, tuple)):
        items = [str(v) for v in text]
    else:
        items = [t.strip() for t in str(text).split(",")]
    if not items or not all(re.fullmatch(r"[1-9]\d*", t) for t in items):
        raise DynamicShapeError(f"{option} '{text}': expected positive whole numbers separated by commas, e.g. 1,2,4,8")
    return [int(t) for t in items]


def _named_lists(spec) -> dict[str, list[int]]:
    if isinstance(spec, dict):
        return {str(k): _values(v, f"--dynamic-dims {k}") for k, v in spec.items()}
    out = {}
    for part in str(spec).split(";"):
        name, sep, values = part.strip().partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][\w.]*", name.strip()):
            raise DynamicShapeError(f"--dynamic-dims '{spec}': expected NAME=1,4;NAME=32,64")
        if name.strip() in out:
            raise DynamicShapeError(f"--dynamic-dims '{spec}': {name.strip()} is listed twice")
        out[name.strip()] = _values(values, f"--dynamic-dims {name.strip()}")
    return out


def _explicit(spec) -> list[Gear]:
    if isinstance(spec, (list, tuple)):
        parts = [g if isinstance(g, dict) else _binding(str(g), spec) for g in spec]
    else:
        parts = [_binding(p, spec) for p in str(spec).split(";") if p.strip()]
    gears = [Gear(tuple((str(k), int(v)) for k, v in p.items())) for p in parts]
    keys = {tuple(k for k, _ in g.dims) for g in gears}
    if not gears or len(keys) != 1:
        raise DynamicShapeError(f"--gears '{spec}': every gear binds the same names, e.g. B=1,S=32;B=4,S=128")
    return gears


def _binding(text: str, spec) -> dict[str, int]:
    out = {}
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][\w.]*", name) or not re.fullmatch(r"[1-9]\d*", value):
            raise DynamicShapeError(f"--gears '{spec}': expected NAME=VALUE,NAME=VALUE;..., e.g. B=1,S=32;B=4,S=128")
        out[name] = int(value)
    return out


def _describe(dynamic) -> str:
    if not dynamic:
        return "none: every input shape is fixed"
    return ", ".join(f"{inp}[{axis}]" + (f" '{name}'" if name else " (unnamed)") for inp, axis, name in dynamic)
