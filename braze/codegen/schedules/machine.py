"""The machine model the schedule rules size their tiles and loop orders
with (docs/schedules.md, "The machine model"): vector lanes, registers,
FMA latency, the accumulators a register tile may hold, cache sizes, the
bytes a tensor takes, and the decisions built on them (which loops go
outside, how many input channels a K block takes).

A target (targets/descriptor.py) gives the numbers; a target that lacks
one (a bare namespace in a test) gets the fallback named here.
"""

from __future__ import annotations

#: Result dtypes the CPU rules schedule. Their kernels compute in float32:
#: 16-bit operands are widened as they are read (F16C on x86; a shift for
#: bfloat16) and results rounded as they are stored, so register tiles and
#: vector widths are float32's (docs/schedules.md, "16-bit kernels").
FLOAT32_MATH = frozenset({"f32", "f16", "bf16"})

#: Bytes of one float32 accumulator (a register tile's, a K block's local output).
ACC_BYTES = 4

#: Fallbacks for a target that does not say: a Skylake-SP core's caches.
L1D_BYTES, L2_BYTES = 32 << 10, 1 << 20

#: Cycles from an FMA's start to its result on current x86 and Arm cores.
FMA_LATENCY = 4


def wide(value):
    """A TE/TIR value read as float32 when it is 16-bit (a rule's own
    lowering computes and accumulates in float32, as FLOAT32_MATH says)."""
    return value.astype("float32") if value.dtype in ("float16", "bfloat16") else value


# --- the target's numbers -------------------------------------------------------------------------
def lanes(target, dtype: str = "float32") -> int:
    """Vector lanes of ``dtype`` on the target (16 floats with AVX-512)."""
    bits = getattr(target, "vector_bits", 512) or 128
    width = {"float16": 16, "bfloat16": 16, "float64": 64, "int8": 8, "uint8": 8, "int64": 64}.get(dtype, 32)
    return max(1, bits // width)


def registers(target) -> int:
    """Architectural vector registers of the target: 16 with AVX2/SSE, 32
    with AVX-512 and on AArch64."""
    return getattr(target, "vector_registers", 0) or (32 if lanes(target) >= 16 else 16)


def cores(target) -> int:
    """The cores a kernel's tasks are spread over."""
    return max(1, getattr(target, "num_cores", 1) or 1)


def l1_bytes(target) -> int:
    """The L1 data cache of one core."""
    return getattr(target, "l1d_bytes", 0) or L1D_BYTES


def l2_bytes(target) -> int:
    """The L2 cache of one core."""
    return getattr(target, "l2_bytes", 0) or L2_BYTES


def element_bytes(t, widened: bool = False) -> int:
    """The bytes of one element of tensor type ``t`` as a kernel holds it:
    its dtype's real size, or float32's where the kernel reads a widened copy."""
    return ACC_BYTES if widened else t.np_dtype.itemsize


def nbytes(t, widened: bool = False) -> int:
    """The bytes of tensor type ``t`` as a kernel holds it: its dtype's
    real size, or float32's where the kernel reads a widened copy."""
    return t.size * ACC_BYTES if widened else t.nbytes


# --- register tiles --------------------------------------------------------------------------------
def min_accumulators(target) -> int:
    """Independent accumulators that keep every FMA unit busy: latency x
    units (8 on AVX2 cores with 2 units); a tile with fewer waits on its
    own additions."""
    return FMA_LATENCY * max(1, getattr(target, "fma_units", 2) or 2)


def accumulators(target, loads: int, cap: int = 16) -> int:
    """Vector accumulators a register-tiled micro-kernel may hold: the
    register file less the ``loads`` vectors each step loads, the one it
    broadcasts into and one LLVM keeps for itself (16 - 2 - 2 = 12 on AVX2
    for two-vector-wide tiles; a tile that takes the last registers makes
    LLVM spill), and at most ``cap`` (beyond 16, a tile's rows or columns
    outgrow what one step's loads can feed)."""
    return max(1, min(cap, registers(target) - loads - 2))


def pick_tile(candidates: list[tuple[int, dict]], target=None) -> dict | None:
    """The register tile to use from ``(accumulators, params)`` candidates
    in order of preference (widest vectors first): the first with at least
    ``min_accumulators(target)``, else the one with the most accumulators
    (a wide tile over a narrow map has too few to hide the FMA latency)."""
    for acc, params in candidates:
        if acc >= min_accumulators(target):
            return params
    return max(candidates, key=lambda c: c[0])[1] if candidates else None


def divisor_at_most(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


# --- loop orders and cache blocks -------------------------------------------------------------------
def in_half_l2(nbytes_: int, target) -> bool:
    """Whether ``nbytes_`` fit in half of a core's L2 (the other half for
    what streams past them)."""
    return nbytes_ <= l2_bytes(target) // 2


def rows_outside(weights: int, streamed: int, target) -> int:
    """The loop order of a direct conv or a GEMM by a weight: 2 (rows of
    the output outside, weight blocks inside) when the weights, re-read
    once per row, fit in half of L2 and are fewer bytes than what streams
    past them (the input, or the output written); else 1 (weight blocks
    outside, each hot while the whole of the other passes)."""
    return 2 if in_half_l2(weights, target) and weights < streamed else 1


#: Input channels a K block takes at most (``block_c`` of conv2d, blocked
#: and the 8-bit blocked convs): a tile's accumulators are reloaded once
#: per K block, so a block much under this spends its time on reloads.
BLOCK_C = 64


def block_c(channels: int, channel_block: int, tile_bytes: int, order: int, target) -> int:
    """Input channels a K block (``block_c``), in whole blocks of
    ``channel_block`` channels (1: a plain input). K blocks only with
    weight blocks outside (order 1) and a tile's whole output
    (``tile_bytes``, float32) in L1: each block of input channels then
    passes over every output row before the next, so that the weights,
    cold in a model, stream while the tiles compute. The most blocks up to
    ``BLOCK_C`` channels that divide them; under half of that, the fewest
    up to twice ``BLOCK_C`` (7 blocks of 49), else all channels."""
    if order != 1 or tile_bytes > l1_bytes(target):
        return channels
    n, want = channels // channel_block, max(1, BLOCK_C // channel_block)
    blocks = divisor_at_most(n, want)
    if 2 * blocks < want:
        blocks = min((d for d in range(want + 1, 2 * want + 1) if n % d == 0), default=n)
    return blocks * channel_block if blocks * channel_block < channels else channels
