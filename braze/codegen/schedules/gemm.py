"""GEMM: ``nn.matmul`` (dense and batched) as a register-blocked micro-kernel.

``C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]``: the output is cut in tiles of
``tile_m`` rows by ``tile_n`` columns; a tile's accumulators stay in vector
registers (``tile_m * tile_n / lanes`` of them, sized to the target's
register file: 24 zmm for 8x48 with AVX-512, 12 ymm for 6x16 with AVX2)
while k runs, each step broadcasting one A element per row and
loading ``tile_n`` contiguous B elements (``unroll_k`` steps a loop body). A constant B (a weight) is packed
once, at compile time, into panels ``Bp[N / tile_n, K, tile_n]`` so that a
tile reads one contiguous panel. The elementwise epilogue (bias, residual,
activation) runs on the tile while it is hot. Tiles are spread over the
cores. (Its measurements against onnxruntime: benchmarks/results/.)
"""

from __future__ import annotations

import numpy as np
from tvm import te

from ..kernel import Packing
from ..lowerings.nn import matmul
from .machine import ACC_BYTES, FLOAT32_MATH, accumulators, cores, lanes, nbytes, registers, rows_outside
from .rule import Param, Rule, register, weight_param
from .tir import blocks_under, epilogue_of, extent, tile_result


def _shapes(op):
    a, b = op.operands[0].type.shape, op.operands[1].type.shape
    return a, b, op.results[0].type.shape


def applies(op, kernel, target) -> bool:
    a, b, out = _shapes(op)
    return (len(a) >= 2 and len(b) >= 2 and op.results[0].type.dtype in FLOAT32_MATH and a[-1] > 0
            and all(d > 0 for d in out))


def _rows(target, tile_n: int, v: int) -> int:
    """Rows of a tile ``tile_n`` wide whose accumulators fit the registers
    beside the B vectors and the broadcast: 8 with AVX-512 (16 of 32
    registers), 6 with AVX2 at two vectors wide (12 of 16: the 6x16 tile)."""
    nv = max(1, tile_n // v)
    return max(1, min(MAX_ROWS, accumulators(target, nv) // nv))


#: k steps the micro-kernel's loop body holds (``unroll_k``): one step a
#: body spends a loop's bookkeeping on every 16 FMAs; 4 steps bring it
#: under the loads' cost, and more only grow the code.
UNROLL_K = 4
#: rows of a tile at most: 8 rows of 3 vectors fill AVX-512's 32 registers
MAX_ROWS = 8
#: the fewest rows a tile takes before it widens instead (a GEMV): fewer
#: leave too few independent accumulators per column vector
MIN_ROWS = 4
#: how many times wider a few-row tile may grow, in order of preference:
#: the widths that divide the common column counts with the fewest tiles
WIDEN = (4, 5, 3, 2)


def defaults(op, kernel, target) -> dict | None:
    params = _tile(op, target)
    if params is not None:
        k = op.operands[0].type.shape[-1]
        params["unroll_k"] = next(u for u in (UNROLL_K, 2, 1) if k % u == 0)
        params["order"] = _order(op, target)
    return params


def _order(op, target) -> int:
    """1: column tiles outside, each B panel hot while every row tile
    passes (a weight that outgrows L2); 2: row tiles outside, when B fits
    in half of L2 and the output outweighs it, so that the output is
    written row band by row band, in order, where column tiles wrote each
    row's tile a whole row apart (``rows_outside``). B counted once (one
    batch's) at its real size; the output (one batch's) at float32's
    whatever its dtype, so that a 16-bit kernel keeps the order of its
    float32 twin, whose row writes the order is chosen for."""
    _, b, out = _shapes(op)
    k, n, m = b[-2], b[-1], out[-2]
    return rows_outside(nbytes(op.operands[1].type.with_shape((k, n))), m * n * ACC_BYTES, target)


#: vectors a tile spans where they divide the columns: 8 rows x 3 with 32 registers (AVX-512), 4 x 3 with 16 (AVX2)
WIDE_VECTORS = 3
#: accumulators a tile that spans all of a narrow output (``WHOLE_ROW_VECTORS``) may hold
WHOLE_ROW_ACCUMULATORS = 24
#: output columns, in vectors, that one tile spans whole when the registers allow 4 rows of it
WHOLE_ROW_VECTORS = (3, 4)


def _tile(op, target) -> dict | None:
    _, _, out = _shapes(op)
    m, n = out[-2], out[-1]
    v = lanes(target)
    if n % v == 0 and n // v in WHOLE_ROW_VECTORS:
        # a narrow output (attention times V: 64 columns, one head) in one
        # tile: A, often the larger operand (the attention weights), is
        # read once instead of once per column tile. AVX2's 16 registers
        # hold 2 rows of 4 vectors: not taken there.
        rows = accumulators(target, n // v, cap=WHOLE_ROW_ACCUMULATORS) // (n // v)
        if rows >= MIN_ROWS and m >= rows:
            return {"tile_m": rows, "tile_n": n}
    if n % (WIDE_VECTORS * v) == 0:
        # tiles 3 vectors wide, as many rows as the register file holds
        # beside the 3 B vectors and the broadcast (capped at 8): 8 x 3 (24
        # accumulators) with 32 registers, 4 x 3 (12, every register in use)
        # with 16: more FMAs per load than 2 vectors wide, fewer A rows to
        # stream than 6 x 4, which pads 128 rows. Where more rows fit (9
        # with 32 registers), the count that pads the rows least, 8 on a
        # tie (197 rows: 22 tiles of 9 rather than 25 of 8)
        most = (registers(target) - WIDE_VECTORS - 1) // WIDE_VECTORS
        rows = min(range(min(MAX_ROWS, most), most + 1), key=lambda r: (-(-m // r) * r, r))
        if rows >= MIN_ROWS and m >= rows:
            return {"tile_m": rows, "tile_n": WIDE_VECTORS * v}
    for tile_n in (2 * v, v, v // 2):
        if tile_n >= 1 and n % tile_n == 0:
            tile_m = min(_rows(target, tile_n, v), m)
            if tile_m < MIN_ROWS:  # few rows (a GEMV): more columns per tile, for independent accumulators
                tile_n *= next((f for f in WIDEN if n % (tile_n * f) == 0
                                and tile_m * max(1, tile_n * f // v) <= accumulators(target, tile_n * f // v)), 1)
            return {"tile_m": tile_m, "tile_n": tile_n}
    if n >= v:  # columns that fill no vector evenly (197 keys): padded (prepare)
        tile_n = 2 * v if n >= 2 * v else v
        return {"tile_m": min(_rows(target, tile_n, v), m), "tile_n": tile_n}
    return None


def packings(op, kernel, target, params) -> dict:
    index = weight_param(op, kernel, rank=2)
    if index is None:
        return {}
    k, n = op.operands[1].type.shape
    nr = params["tile_n"]
    if n % nr:
        return {}

    def pack(w: np.ndarray) -> np.ndarray:
        return w.reshape(k, n // nr, nr).transpose(1, 0, 2)

    def unpack(p: te.Tensor) -> te.Tensor:
        return te.compute((k, n), lambda r, c: p[c // nr, r, c % nr], name="unpack_gemm")

    return {index: Packing(f"gemm-panels-{nr}", (n // nr, k, nr), pack, unpack)}


def _padded_rows(op, params) -> int | None:
    """The rows ``lower`` computes when ``tile_m`` does not divide the output's (else None)."""
    m, tile_m = op.results[0].type.shape[-2], int(params["tile_m"])
    return -(-m // tile_m) * tile_m if m % tile_m and m > tile_m else None


def lower(op, params):
    """Rows that do not fill the last tile (197 tokens): the matmul over
    whole tiles of rows, those past the end reading A's last row (an index
    clamped once per tile row, outside the k loop) and dropped when the
    tile is written back; padding A with zero rows instead would be a
    stage of its own, a copy of A each run."""
    rows = _padded_rows(op, params)
    if rows is None:
        return None

    def clamped(a, b):
        *lead, m, k = (int(d) for d in a.shape)
        view = te.compute((*lead, rows, k), lambda *i: a[(*i[:-2], te.min(i[-2], m - 1), i[-1])],
                          name="gemm_rows", attrs={"braze.view": 1})
        y = matmul(view, b)
        out = [int(d) for d in y.shape]
        out[-2] = m
        return te.compute(out, lambda *i: y[i], name="gemm_rows_out")

    return clamped


def prepare(sch, block, op, target, params) -> None:
    """Columns that do not fill the last tile: pad the column space to a
    multiple of ``tile_n`` -- zero columns of B, dropped from C -- rather
    than test each element inside the micro-kernel, which halves its
    speed. (Rows: ``lower``.)"""
    n = op.results[0].type.shape[-1]
    tile_n = int(params["tile_n"])
    padding = [1] * len(sch.get(block).iter_vars)  # (batch..., i, j, k)
    if n % tile_n:
        padding[-2] = tile_n
    if padding != [1] * len(padding):
        sch.pad_einsum(block, padding)


def apply(sch, block, op, target, params) -> set[str]:
    tile_m, tile_n = int(params["tile_m"]), int(params["tile_n"])
    v = lanes(target)
    while tile_n % v:  # a tile of 40 columns: five vectors of 8
        v //= 2
    *batch, i, j, k = sch.get_loops(block)
    epi = epilogue_of(sch, block, padded=True)
    io, ii = sch.split(i, [None, tile_m])
    jo, jv, jl = sch.split(j, [None, tile_n // v, v])
    order = int(params["order"])
    # a B shared by every batch (a weight times a batch of channels-last
    # maps, or of sequences): with column tiles outside, its panel passes
    # over every batch's rows before the next one, where batches outside
    # would read all of B once each
    shared = len(op.operands[1].type.shape) == 2 and order == 1
    lead = [jo, *batch, io] if shared else [*batch, jo, io] if order == 1 else [*batch, io, jo]
    # a 16-bit weight widened in a stage (``stage_16bit``): one panel at a
    # time, as a task of its own column panel starts, where the panels are
    # enough to share among the cores; else read and converted in place
    widened = _widened_weight(sch, block, tile_n, extent(sch, k), op.results[0].type.shape[-1])
    panel_tasks = (widened is not None and shared
                   and extent(sch, jo) >= PANELS_PER_CORE * cores(target))
    if widened is not None and not panel_tasks:
        sch.compute_inline(widened)
    unroll_k = int(params["unroll_k"])
    if unroll_k > 1 and extent(sch, k) % unroll_k == 0:
        k, steps = sch.split(k, [None, unroll_k])
        sch.reorder(*lead, k, steps, ii, jv, jl)
        sch.unroll(steps)
    else:
        sch.reorder(*lead, k, ii, jv, jl)
    tile_result(sch, block, epi, lead[-1], v)
    sch.unroll(ii)
    sch.unroll(jv)
    sch.vectorize(jl)
    if panel_tasks:
        outer = jo
        sch.compute_at(widened, jo)
        *_, lanes_loop = sch.get_loops(widened)
        sch.vectorize(sch.split(lanes_loop, [None, v])[1])
    else:
        outer = sch.fuse(*lead)
    sch.parallel(outer)
    sch.decompose_reduction(block, k)
    handled = blocks_under(sch, outer)
    init = [b for b in sch.get_child_blocks(outer) if sch.get(b).name_hint.endswith("_init")]
    for b in init:
        sch.vectorize(sch.get_loops(b)[-1])
    return handled


def _widened_weight(sch, block, tile_n: int, k: int, n: int):
    """The float32 stage of a 16-bit packed weight the matmul reads
    (``widen`` of ``[N / tile_n, K, tile_n]`` panels), or None."""
    for producer in sch.get_producers(block):
        stage = sch.get(producer)
        if stage.name_hint.startswith("widen") and len(stage.writes) == 1:
            shape = [int(d) for d in stage.writes[0].source.shape]
            if len(shape) == 3 and shape[1:] == [k, tile_n] and shape[0] * tile_n >= n:
                return producer
    return None


def _stage_16bit(op, kernel) -> tuple[int, ...]:
    """A, broadcast one element at a time; and a constant bfloat16 B, each
    packed panel widened once per task rather than each vector once per
    tile of rows: bfloat16 widens by a zero-extension and a shift, two
    instructions a vector, against F16C's one for float16, which stays
    cheaper converted in place."""
    bf16_weight = weight_param(op, kernel, rank=2) is not None and op.operands[1].type.dtype == "bf16"
    return (0, 1) if bf16_weight else (0,)


def tiles(op, target, defaults) -> list[dict]:
    """Tiles of 4, 8 and 16 rows by 1, 2 and 3 vectors that divide the columns."""
    m, n = op.results[0].type.shape[-2], op.results[0].type.shape[-1]
    v = lanes(target)
    return [{"tile_m": min(tm, m), "tile_n": tn} for tm in (4, 8, 16)
            for tn in (v, 2 * v, WIDE_VECTORS * v) if n % tn == 0]


PARAMS = (
    Param("tile_m", "rows of the register tile", "rows whose accumulators fit the registers beside the B vectors",
          grid=()),
    Param("tile_n", "columns of the register tile (and of a packed B panel)",
          "1 to 4 vectors that divide the columns, as the registers allow", packs=True, grid=()),
    Param("unroll_k", "k steps a loop body of the micro-kernel holds", f"{UNROLL_K}, or the most of 2, 1 dividing k",
          values=(1, 2, 4), grid=(1,)),
    Param("order", "1: column tiles outside; 2: row tiles outside",
          "2 when B fits in half of L2 and the output outweighs it", values=(1, 2), grid=(1, 2)),
)

#: column panels a core must have before a 16-bit B is widened panel by panel in tasks of their own
PANELS_PER_CORE = 2

register(Rule("gemm", ("nn.matmul",), __doc__.split("\n\n")[0], applies, defaults, apply, packings, prepare,
              params=PARAMS, tiles=tiles, stage_16bit=_stage_16bit, lower=lower))
