"""vnni_conv, pmaddwd_conv: quantized convolutions in the blocked layout, summed exactly in int32.

A quantized model's conv after the fold-quant pass (passes/quant.py) is
``nn.conv`` of uint8 activations by an int8 constant weight, giving int32,
followed by its elementwise epilogue (the zero point's compensation, the
cast to float32, the scales, the bias, the quantization back to uint8);
the layout pass blocks it (``nn.conv_blocked``), the input in blocks of a
multiple of four uint8 channels, so that four input channels of a pixel
are one 32-bit word. These rules take a dense or grouped (not depthwise)
one whose output block is the target's int32 lanes:

- ``vnni_conv``, where the target has VNNI at its vector width
  (AVX512-VNNI, ``avx512vnni``, on 512-bit vectors; AVX-VNNI on 256-bit
  ones: ``vnni.has_vnni``): the ``blocked`` rule's schedule and
  parameters (a register tile of ``tile_k`` vectors of output channels x
  ``tile_w`` output columns, the reduction over input channel blocks,
  taps and a block's channels outside it), with each input block's
  channels split in fours, the four innermost under the vector of output
  channels, which one ``VPDPBUSD`` computes (64 multiply-adds on a zmm,
  the word of input broadcast). The weight is packed once, at compile
  time, as ``[M/16, C/bi, R, S, bi/4, 16, 4]``.
- ``pmaddwd_conv``, where it has no VNNI (AVX2, AVX-512 without VNNI):
  the same with pairs of input channels, each step ``VPMADDWD`` on the
  pair widened to int16 and the weights sign-extended, and an add; the
  weight packed as ``[M/L, C/bi, R, S, bi/2, L, 2]`` int8.

The input's spatial padding holds the conv's ``pad_value`` (the input's
zero point): a padded copy of the rows a task reads (``pad`` 1, the only
choice: a guarded read is no word of memory to broadcast). The padded
channels of a block hold what the producer left there, and their weights
are zero.
"""

from __future__ import annotations

import numpy as np
from tvm import te

from ...ir.ops.layout import blocked_depthwise
from ..kernel import Packing
from . import blocked
from .intrinsics_conv8 import GROUPS, int8_conv_vector
from .machine import divisor_at_most, lanes, registers
from .rule import Rule, register, weight_param
from .vnni import has_pmaddwd, has_vnni


def _applies(form: str, op, kernel, target) -> bool:
    """A blocked dense or grouped conv of a uint8 input in blocks of whole
    groups of the form, an int8 constant weight, the output in blocks of
    the target's int32 lanes."""
    x, w, out = op.operands[0].type, op.operands[1].type, op.results[0].type
    return (x.dtype == "ui8" and w.dtype == "i8" and x.rank == 5 and x.shape[4] % GROUPS[form] == 0
            and out.shape[4] == lanes(target) and not blocked_depthwise(op) and all(d > 0 for d in out.shape)
            and weight_param(op, kernel) is not None)


#: the share of the registers a ``pmaddwd`` tile may hold with 16 of them
#: (AVX2): its step widens each pair it broadcasts and keeps its products
#: apart from the accumulators, and a larger tile spills them to the stack
PMADDWD_TILE_SHARE = 4
#: registers from which a ``pmaddwd`` tile takes ``blocked``'s size (AVX-512's 32)
PMADDWD_FULL_REGISTERS = 32


def _defaults(form: str, op, kernel, target) -> dict | None:
    """The ``blocked`` rule's parameters (its loop order and K blocks weigh
    the real bytes of int8 weights and uint8 inputs); a ``pmaddwd`` tile
    cut to a quarter of AVX2's registers."""
    params = blocked.blocked_defaults(op, kernel, target)
    if params is None:
        return None
    if form == "pmaddwd" and registers(target) < PMADDWD_FULL_REGISTERS:
        ow, tile_k = op.results[0].type.shape[3], int(params["tile_k"])
        params["tile_w"] = divisor_at_most(ow, max(1, registers(target) // PMADDWD_TILE_SHARE // tile_k))
    return params


def _packings(form: str, op, kernel, target) -> dict:
    """The weight as ``[M/L, C/bi, R, S, bi/g, L, g]``: per input block and
    tap, each group of ``g`` input channels a vector of ``L`` output
    channels x the group (``W[o, i] = P[o // L, i // bi, y, z, i % bi // g,
    o % L, i % g]``)."""
    index = weight_param(op, kernel)
    m, cg, r, s = op.operands[1].type.shape
    bi, b, g = op.operands[0].type.shape[4], op.results[0].type.shape[4], GROUPS[form]

    def pack(w: np.ndarray) -> np.ndarray:
        return w.reshape(m // b, b, cg // bi, bi // g, g, r, s).transpose(0, 2, 5, 6, 3, 1, 4)

    def unpack(p: te.Tensor) -> te.Tensor:
        return te.compute((m, cg, r, s), lambda o, i, y, z: p[o // b, i // bi, y, z, i % bi // g, o % b, i % g],
                          name="unpack_conv")

    return {index: Packing(f"conv-int8-{form}-{bi}x{b}", (m // b, cg // bi, r, s, bi // g, b, g), pack, unpack)}


def _check(op, target, params) -> str | None:
    """A partial tile's guard would sit between the vector and its group: no intrinsic matches it."""
    _, kb, _, ow, _ = op.results[0].type.shape
    if kb % params["tile_k"] or ow % params["tile_w"]:
        return (f"tile_k must divide the {kb} channel blocks and tile_w the {ow} columns, "
                f"got tile_k={params['tile_k']}, tile_w={params['tile_w']}")
    return None


def _apply(form: str, sch, block, op, target, params) -> set[str]:
    vector = int8_conv_vector(form, lanes(target), 5, 7, len(op.results[0].type.shape))
    return blocked.blocked_apply(sch, block, op, target, params, pairs=vector, group=GROUPS[form])


def _rule(name: str, form: str, available) -> Rule:
    """The rule ``name``: the ``form`` step where ``available(target)``."""

    def applies(op, kernel, target) -> bool:
        return available(target) and _applies(form, op, kernel, target)

    def defaults(op, kernel, target) -> dict | None:
        return _defaults(form, op, kernel, target)

    def packings(op, kernel, target, params) -> dict:
        return _packings(form, op, kernel, target)

    def apply(sch, block, op, target, params) -> set[str]:
        return _apply(form, sch, block, op, target, params)

    def tiles(op, target, defaults) -> list[dict]:
        """``blocked``'s tiles that divide the channel blocks and the row."""
        kb, ow = op.results[0].type.shape[1], op.results[0].type.shape[3]
        return [t for t in blocked.blocked_tiles(op, target, defaults) if kb % t["tile_k"] == 0 and ow % t["tile_w"] == 0]

    doc = __doc__.split("\n\n")[0]
    return Rule(name, ("nn.conv_blocked",), doc, applies, defaults, apply, packings, params=blocked.PADDED_COPY_PARAMS, check=_check,
                tiles=tiles, integer=True)


register(_rule("vnni_conv", "vpdpbusd", has_vnni))
register(_rule("pmaddwd_conv", "pmaddwd", lambda target: has_pmaddwd(target) and not has_vnni(target)))
