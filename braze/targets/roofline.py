"""Estimated time of each kernel on an Ascend-like NPU: a roofline model.

For each kernel (a fused group or a single op) of a fused module:

- **cube work**: conv/matmul as GEMMs (batch x M x N x K), padded to the
  cube's fractal, tiled for L0A/L0B/L0C (``cube_tile``) and spread over the
  cube cores in waves of tiles;
- an attention (``nn.attention``) as its two GEMMs (q k^T and p v per head)
  on the cube and its softmax on the vector unit, the scores kept on chip
  (flash attention: only q, k, v and the result move);
- **vector work**: every other op, in vector instructions (elements x a
  per-op count, ``VECTOR_COST``), at ``vec_calc_size`` bytes per cycle on
  each vector unit the kernel's tiles occupy;
- **traffic**: the kernel's inputs and outputs, at the chip's compute
  precision; weights and model inputs come from DDR, tensors another
  kernel produced from L2 when they fit it; a GEMM's left operand is read
  again (from L2) for every L1 panel of its right one. Bandwidth is per AI core, so
  a kernel that occupies few cores gets little of it.

``roofline_us = max(cube_us + vector_us, memory_us)``: compute and traffic
overlap, the cube and vector parts of a fused kernel run one after the
other. ``estimate_us = roofline_us + launch_us``: every kernel also pays the
descriptor's per-kernel launch and synchronization cost (``npu.launch_us``,
an assumed figure: docs/targets.md), which is what fusing fewer, larger
kernels saves beyond traffic. Not modelled: pipeline bubbles, bank
conflicts, format conversion (NCHW -> NC1HWC0), and anything an actual tiler
does better or worse. It is a comparison tool (fusion on/off, one chip vs
another), not a prediction of measured time.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from ..ir import Module, Operation, Value
from ..ir.registry import Kind, contraction, lookup
from . import Target
from .descriptor import NpuSpec

#: Vector instructions per element for ops that are not one instruction
#: (the usual expansion of a composite function); reductions and
#: normalisations count per input element, pools per output element and
#: window position; layout ops move every element once; views are free.
#: ops whose GEMMs run on the cube and whose softmax runs on the vector unit
ATTENTION_OPS = frozenset({"nn.attention", "nn.attention_scores"})
#: vector instructions per score of an attention: scale, mask, max, exp, sum, the p cast
ATTENTION_VECTOR_COST = 6

VECTOR_COST = {
    "math.erf": 8, "math.gelu": 10, "math.tanh": 4, "math.sigmoid": 3, "math.softplus": 3, "math.elu": 3,
    "math.selu": 4, "math.sin": 8, "math.cos": 8, "math.pow": 3, "math.hard_swish": 3, "math.hard_sigmoid": 2,
    "math.softsign": 2, "math.mod": 2, "math.prelu": 2, "math.leaky_relu": 2, "math.clip": 2,
    "nn.softmax": 5, "nn.log_softmax": 5, "nn.layer_norm": 8, "nn.instance_norm": 8, "nn.batch_norm": 2,
    "nn.lrn": 6, "reduce.l2": 2, "tensor.reshape": 0, "tensor.identity": 0,
}


@dataclass
class KernelEstimate:
    name: str  # the group's name, or the op's node name
    nodes: list[str]
    cube_flops: int
    vector_ops: int
    ddr_bytes: int
    l2_bytes: int
    cores: int  # AI cores the kernel occupies
    cube_us: float
    vector_us: float
    memory_us: float
    roofline_us: float  # max(cube_us + vector_us, memory_us)
    launch_us: float  # the descriptor's per-kernel launch and sync cost
    estimate_us: float  # roofline_us + launch_us
    bound: str  # "cube", "vector" or "memory": what limits roofline_us
    tile: dict = field(default_factory=dict)  # cube tile [m, n, k] and L1 panel width; vector tile elements

    def to_dict(self) -> dict:
        data = asdict(self)
        for key in ("cube_us", "vector_us", "memory_us", "roofline_us", "launch_us", "estimate_us"):
            data[key] = round(data[key], 4)
        return data


@dataclass
class ModelEstimate:
    target: str
    kernels: list[KernelEstimate]

    @property
    def total_us(self) -> float:
        return sum(k.estimate_us for k in self.kernels)

    @property
    def launch_us(self) -> float:
        """What the launches cost: kernels x the descriptor's launch_us."""
        return sum(k.launch_us for k in self.kernels)

    @property
    def roofline_us(self) -> float:
        return sum(k.roofline_us for k in self.kernels)

    def to_dict(self) -> dict:
        return {"target": self.target, "model": "roofline", "total_us": round(self.total_us, 3),
                "roofline_us": round(self.roofline_us, 3), "launch_us": round(self.launch_us, 3),
                "kernels": [k.to_dict() for k in self.kernels]}


class Chip:
    """The derived figures of an NPU descriptor that the model uses."""

    def __init__(self, npu: NpuSpec):
        self.npu = npu
        self.hz = npu.cube_freq * 1e6
        self.half = npu.compute_dtype == "float16"
        # a float32 MAC takes two float16 slots of the cube (Ascend's DtypeMKN 16,8,16)
        self.cube = (npu.cube_m_size, npu.cube_n_size, npu.cube_k_size if self.half else npu.cube_k_size // 2)
        self.vector_units = npu.vector_core_cnt if npu.cube_vector_combine == "split" \
            else npu.ai_core_cnt + npu.vector_core_cnt

    def nbytes(self, v: Value) -> int:
        """Bytes of a tensor on the chip: floats at the compute precision."""
        dtype = v.type.np_dtype
        size = 2 if dtype.kind == "f" and self.half else dtype.itemsize
        return v.type.size * size

    def elem_bytes(self, v: Value) -> int:
        return max(self.nbytes(v) // max(v.type.size, 1), 1)


def estimate_module(module: Module, target: Target) -> ModelEstimate:
    """Every kernel of a (fused) module, in execution order."""
    chip = Chip(target.npu)
    produced: set[int] = set()
    kernels = []
    for op in module.main.body.ops:
        if op.name in ("const", "func.return"):
            continue
        if op.name == "fuse.group":
            block = op.regions[0].blocks[0]
            members = [o for o in block.ops if o.name != "fuse.yield"]
            name, inputs = op.attributes["name"], list(zip(block.args, op.operands))
        else:
            members, name = [op], (op.loc.name if op.loc else op.name)
            inputs = [(v, v) for v in dict.fromkeys(op.operands)]
        nodes = list(dict.fromkeys(o.loc.name for o in members if o.loc)) or [name]
        kernels.append(estimate_kernel(name, nodes, members, inputs, list(op.results), chip, produced))
        produced |= {id(r) for r in op.results}
    return ModelEstimate(target.name, kernels)


def estimate_kernel(name: str, nodes: list[str], members: list[Operation], inputs: list[tuple[Value, Value]],
                    outputs: list[Value], chip: Chip, produced: set[int]) -> KernelEstimate:
    """One kernel: ``inputs`` pairs each value its members read (inside) with
    the value it is outside (where it comes from); ``produced`` holds the
    values earlier kernels wrote."""
    npu = chip.npu
    tile: dict = {}
    cube_cycles, cube_cores, cube_flops, rereads = 0, 0, 0, {}
    for op in members:
        for gemm in cube_gemms(op):
            cycles, cores, flops, info, reread = _cube(gemm, chip, chip.elem_bytes(op.operands[0]))
            cube_cycles, cube_flops = cube_cycles + cycles, cube_flops + flops
            cube_cores = max(cube_cores, cores)
            tile.update(info)
            rereads[id(op.operands[0])] = reread
    vector_ops, widest, eb = 0, 0, 2
    vector_members = [op for op in members if not contraction(op.name)]
    for op in vector_members:
        vector_ops += vector_work(op)
        big = max(list(op.operands) + list(op.results), key=lambda v: v.type.size)
        if big.type.size > widest:
            widest, eb = big.type.size, chip.elem_bytes(big)
    vector_cycles, vector_cores = 0.0, 0
    if vector_members and widest:
        tensors = len({id(v) for op in vector_members for v in list(op.operands) + list(op.results)})
        capacity = max(npu.ubblock_size, npu.ub_size // (2 * max(tensors, 1))) // eb
        block = max(npu.ubblock_size // eb, 1)
        elems = min(capacity, math.ceil(widest / chip.vector_units))
        elems = max(block, block * math.ceil(elems / block))
        vector_cores = min(chip.vector_units, math.ceil(widest / elems))
        lanes = npu.vec_calc_size / eb
        vector_cycles = vector_ops / (lanes * vector_cores)
        tile["vector_elems"] = elems
    # vector cores share their AI core's path to memory (split: two per AI core)
    per_core = max(chip.vector_units // npu.ai_core_cnt, 1)
    cores = max(1, min(npu.ai_core_cnt, max(cube_cores, math.ceil(vector_cores / per_core))))
    ddr, l2 = 0, 0
    for inner, v in inputs:
        nbytes, cached = chip.nbytes(v), chip.nbytes(v) <= npu.l2_size
        if id(v) in produced and cached:
            l2 += nbytes
        else:
            ddr += nbytes
        again = nbytes * (rereads.get(id(inner), 1) - 1)  # a GEMM's left operand, once per L1 panel
        l2, ddr = (l2 + again, ddr) if cached else (l2, ddr + again)
    for v in outputs:
        if chip.nbytes(v) <= npu.l2_size:
            l2 += chip.nbytes(v)
        else:
            ddr += chip.nbytes(v)
    memory_us = (ddr / npu.ddr_rate + l2 / npu.l2_rate) / cores / chip.hz * 1e6
    cube_us, vector_us = cube_cycles / chip.hz * 1e6, vector_cycles / chip.hz * 1e6
    compute = cube_us + vector_us
    bound = "memory" if memory_us >= compute else ("cube" if cube_us >= vector_us else "vector")
    tile["cores"] = cores
    roofline = max(compute, memory_us)
    return KernelEstimate(name, nodes, cube_flops, int(vector_ops), ddr, l2, cores, cube_us, vector_us, memory_us,
                          roofline_us=roofline, launch_us=npu.launch_us, estimate_us=roofline + npu.launch_us,
                          bound=bound, tile=tile)


# --- the cube ------------------------------------------------------------------------------
def cube_gemms(op: Operation) -> list[tuple[int, int, int, int]]:
    """The GEMMs (batch, M, N, K) an op runs on the cube: a conv's or a
    matmul's one; an attention's two per query head."""
    if contraction(op.name):
        return [gemm_shape(op)]
    if op.name in ATTENTION_OPS:
        h = _attention_heads(op)
        batch = h.batch * h.q_heads
        return [(batch, h.q_seq, h.kv_seq, h.head_size), (batch, h.q_seq, h.v_head_size, h.kv_seq)]
    return []


def _attention_heads(op: Operation):
    from ..ir.ops.attention import heads_of

    a = lookup(op.name).normalize_attrs(op.attributes)
    return heads_of(*(v.type for v in op.operands[:3]), a["q_heads"], a["kv_heads"])


def gemm_shape(op: Operation) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of a conv/matmul seen as GEMMs (a conv per group, im2col)."""
    out = op.results[0].type.shape
    if op.name == "nn.matmul":
        a, b = op.operands[0].type.shape, op.operands[1].type.shape
        m = a[-2] if len(a) > 1 else 1
        n = b[-1] if len(b) > 1 else 1
        batch = max(math.prod(out) // max(m * n, 1), 1)
        return batch, m, n, a[-1]
    x, w = op.operands[0].type.shape, op.operands[1].type.shape
    group = lookup(op.name).normalize_attrs(op.attributes)["group"]
    window = math.prod(w[2:])
    if op.name == "nn.conv":  # out[N, M, *o] = x[N, C, *i] * w[M, C/g, *k]
        return group, out[0] * math.prod(out[2:]), w[0] // group, w[1] * window
    if op.name == "nn.conv_blocked":  # out[N, M/b, OH, OW, b]: the same GEMM
        return group, out[0] * out[2] * out[3], w[0] // group, w[1] * window
    # conv_transpose: every input pixel scatters a (M/g) x window patch: w[C, M/g, *k]
    return group, x[0] * math.prod(x[2:]), w[1] * window, x[1] // group


def cube_tile(m: int, n: int, k: int, chip: Chip, eb: int, batch: int = 1) -> tuple[int, int, int]:
    """(bm, bn, bk): an L0 tile in whole fractals, double-buffered, with
    float32 accumulators in L0C; as large as the GEMM or the buffers allow,
    but small enough to give every cube core a tile when the GEMM is small."""
    npu = chip.npu
    cm, cn, ck = chip.cube

    def halve(bm, bn):
        if bn >= bm and bn > cn:
            return bm, max(cn, _up(bn // 2, cn))
        return max(cm, _up(bm // 2, cm)), bn

    bm, bn = min(_up(m, cm), 128), min(_up(n, cn), 256)
    while bm * bn * 4 > npu.l0_c_size // 2 and (bm > cm or bn > cn):
        bm, bn = halve(bm, bn)
    while batch * math.ceil(m / bm) * math.ceil(n / bn) < npu.cube_core_cnt and (bm > cm or bn > cn):
        bm, bn = halve(bm, bn)
    bk = _up(k, ck)
    while (bm * bk * eb > npu.l0_a_size // 2 or bk * bn * eb > npu.l0_b_size // 2) and bk > ck:
        bk = max(ck, _up(bk // 2, ck))
    return bm, bn, bk


def _cube(gemm, chip: Chip, eb: int):
    """(cycles, cores used, FLOPs, tile info, times the left operand is read)."""
    batch, m, n, k = gemm
    cm, cn, ck = chip.cube
    bm, bn, bk = cube_tile(m, n, k, chip, eb, batch)
    tiles = batch * math.ceil(m / bm) * math.ceil(n / bn)
    per_tile = (bm // cm) * (bn // cn) * math.ceil(k / ck)
    cores = min(tiles, chip.npu.cube_core_cnt)
    cycles = math.ceil(tiles / chip.npu.cube_core_cnt) * per_tile
    # the right operand's K x panel strip stays in half of L1 while the left streams by
    panel = max(bn, bn * ((chip.npu.l1_size // 2) // max(_up(k, ck) * eb * bn, 1)))
    panel = min(panel, _up(n, bn))
    reread = math.ceil(n / panel)
    info = {"cube": [bm, bn, bk], "l1_n": panel}
    return cycles, cores, 2 * batch * m * n * k, info, reread


def _up(x: int, step: int) -> int:
    return step * math.ceil(max(x, 1) / step)


# --- the vector unit -------------------------------------------------------------------------
def vector_work(op: Operation) -> int:
    """Vector instructions' elements for one op (see VECTOR_COST); an
    attention's are its scores' (scale, mask, max, exp, sum, rescale)."""
    if op.name in ATTENTION_OPS:
        h = _attention_heads(op)
        return h.batch * h.q_heads * h.q_seq * h.kv_seq * ATTENTION_VECTOR_COST
    out = op.results[0].type.size if op.results else 0
    cost = VECTOR_COST.get(op.name, 1)
    kind = lookup(op.name).kind if lookup(op.name) else Kind.OPAQUE
    if op.name in ("nn.max_pool", "nn.avg_pool"):
        window = math.prod(lookup(op.name).normalize_attrs(op.attributes)["kernel"])
        return out * window
    if kind == Kind.REDUCE:
        return op.operands[0].type.size * cost
    return out * cost
