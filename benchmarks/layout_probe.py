"""A probe for a layout question: does a 1x1 conv
kernel lose time to NCHW itself? braze's own kernel for a 1x1 Conv + Relu
(NCHW, its default schedule for the target) against a plain NCHWc kernel
written here with TE (activations ``[C/v, H*W, v]``, weights ``[K/v, C/v,
v, v]``, v = the target's float lanes: a tile of ``tile_p`` pixels by
``tile_k`` output channels accumulates in registers while the input
channels run, each step broadcasting ``tile_p`` inputs; parallel over
tiles), for a few tile shapes.

    python benchmarks/layout_probe.py [--target cpu] [--threads 2] [--shapes 256x64x56,64x256x56,...]

Shapes are ``CxKxH``: C input channels, K output channels, an H x H map.
Each kernel is timed alone, two ways:

- warm: calls back to back (the kernel's data in cache after the first
  call), rounds of at least 20 ms, the median of 30 rounds;
- cold: 60 single calls, each after writing every 16th float of a 32 MB
  buffer (every line of it: more than the L2 cache holds, so the kernel's
  input, weights and output start outside L2), median.

The TE kernel is an untuned reference kept from before braze had a blocked
layout of its own: braze's ``layout`` pass and ``blocked`` rule now build
such kernels for conv chains (a lone conv, as here, stays NCHW), so the
probe compares braze's NCHW kernel with an independent NCHWc one.

Both kernels are checked against numpy. Prints one line per kernel: ms warm,
ms cold and GFLOP/s warm. Like `braze schedule`, it runs the kernels here:
a target this CPU cannot run is refused.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

DEFAULT_SHAPES = "256x64x56,64x256x56,1024x256x14,256x1024x14,512x2048x7"
FLUSH_FLOATS = 8 << 20  # 32 MB
TILES = ((7, 2), (8, 2), (14, 2), (4, 4))  # (pixels, output-channel vectors)


def nchwc_kernel(c: int, k: int, pixels: int, v: int, tile_p: int, tile_kv: int, target):
    """The NCHWc 1x1 conv + relu, scheduled: tiles of tile_p pixels by
    tile_kv vectors of output channels in registers."""
    import tvm
    from tvm import s_tir, te

    x = te.placeholder((c // v, pixels, v), name="x")
    w = te.placeholder((k // v, c // v, v, v), name="w")
    cb, ci = te.reduce_axis((0, c // v), name="cb"), te.reduce_axis((0, v), name="ci")
    y = te.compute((k // v, pixels, v), lambda kb, p, ko: te.sum(x[cb, p, ci] * w[kb, cb, ci, ko], axis=[cb, ci]),
                   name="y")
    out = te.compute((k // v, pixels, v), lambda kb, p, ko: te.max(y[kb, p, ko], 0.0), name="relu")
    sch = s_tir.Schedule(te.create_prim_func([x, w, out]))
    block = sch.get_sblock("y")
    kb, p, ko, cbl, cil = sch.get_loops(block)
    kbo, kbi = sch.split(kb, [None, tile_kv])
    po, pi = sch.split(p, [None, tile_p])
    sch.reorder(kbo, po, cbl, cil, pi, kbi, ko)
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, po)
    sch.reverse_compute_inline(sch.get_sblock("relu"))
    sch.unroll(pi)
    sch.unroll(kbi)
    sch.vectorize(ko)
    outer = sch.fuse(kbo, po)
    sch.parallel(outer)
    sch.decompose_reduction(block, cbl)
    for b in sch.get_child_blocks(outer):  # the accumulators' init and their write-back (with the relu)
        if sch.get(b).name_hint.endswith(("_init", "_local")):
            sch.vectorize(sch.get_loops(b)[-1])
    return tvm.compile(sch.mod, target=target).jit()["main"]


def braze_kernel(c: int, k: int, h: int, target, path: str):
    """braze's kernel for Conv(1x1) + Relu on [1, C, H, H], built as a
    compile would build it, and run once: (library, kernel name, args,
    schedule, params, max error against numpy)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from braze.tools.experiment import find_kernel, fused, partition
    from braze.tools.isolate import build_alone, compile_alone, kernel_args, kernel_inputs

    weight = numpy_helper.from_array(np.random.default_rng(1).standard_normal((k, c, 1, 1)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["out"])], "probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, k, h, h])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    module = fused(path, 2, None, None, target.name, None)
    kernel = find_kernel(partition(module.main), "k0")
    func, fallback = build_alone(kernel, target, {})
    if fallback:
        raise SystemExit(f"braze's kernel fell back: {fallback}")
    lib = compile_alone(kernel, func, target)
    arrays = kernel_inputs(module, kernel, 0)
    args = kernel_args(kernel, arrays, dict(kernel.packings))
    lib[kernel.name](*args)
    expected = np.maximum(np.einsum("kc,cp->kp", np.asarray(arrays[1]).reshape(k, c),
                                    arrays[0].reshape(c, h * h)), 0).reshape(1, k, h, h)
    got = args[-1].numpy()
    error = float(np.abs(got - expected).max() / max(1.0, float(np.abs(expected).max())))
    return lib, kernel.name, args, kernel.schedule, kernel.schedule_params, error


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--shapes", default=DEFAULT_SHAPES)
    opts = parser.parse_args(argv)

    import tempfile

    import tvm

    from braze.codegen.schedules.machine import lanes
    from braze.codegen.tvm_target import tvm_target
    from braze.threads import apply_threads
    from braze.tools.experiment import cpu_target

    target = cpu_target(opts.target, opts.threads)
    apply_threads(opts.threads)
    v = lanes(target)
    flush = np.ones(FLUSH_FLOATS, np.float32)
    rng = np.random.default_rng(0)
    print(f"target {target.name} ({v} float lanes), {opts.threads} threads; ms warm / ms cold (L2 flushed)")
    for shape in opts.shapes.split(","):
        c, k, h = (int(d) for d in shape.split("x"))
        pixels, flops = h * h, 2 * c * k * h * h
        print(f"1x1 conv {c} -> {k} channels on {h}x{h}")
        if c % v == 0 and k % v == 0:
            x = rng.standard_normal((c // v, pixels, v)).astype("float32")
            w = rng.standard_normal((k // v, c // v, v, v)).astype("float32")
            expected = np.maximum(np.einsum("cpi,kcio->kpo", x, w), 0)
            args = [tvm.runtime.tensor(x), tvm.runtime.tensor(w), tvm.runtime.empty(expected.shape, "float32")]
            for tile_p, tile_kv in TILES:
                if pixels % tile_p or (k // v) % tile_kv:
                    continue
                fn = nchwc_kernel(c, k, pixels, v, tile_p, tile_kv, tvm_target(target))
                fn(*args)
                error = float(np.abs(args[2].numpy() - expected).max() / max(1.0, float(np.abs(expected).max())))

                warm, cold = _time_function(fn, args, flush)
                print(f"  NCHW{v}c  tile {tile_p} px x {tile_kv * v} ch   {warm:7.3f} {cold:7.3f}  "
                      f"{flops / warm / 1e6:6.0f} GFLOP/s  err {error:.1e}")
        with tempfile.TemporaryDirectory() as tmp:
            lib, name, bargs, schedule, params, error = braze_kernel(c, k, h, target, f"{tmp}/probe.onnx")
            warm, cold = _time_function(lib[name], bargs, flush)
            print(f"  braze NCHW {schedule} {params}   {warm:7.3f} {cold:7.3f}  "
                  f"{flops / warm / 1e6:6.0f} GFLOP/s  err {error:.1e}")


def _time_function(fn, args, flush: np.ndarray) -> tuple[float, float]:
    """warm: back-to-back calls (rounds of at least 20 ms, median of 30);
    cold: single calls after the flush (median of 60)."""
    rounds = []
    for _ in range(30):
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < 0.02:
            fn(*args)
            n += 1
        rounds.append((time.perf_counter() - start) / n)
    cold = []
    for _ in range(60):
        flush[::16] += 1.0
        t = time.perf_counter()
        fn(*args)
        cold.append(time.perf_counter() - t)
    return float(np.median(rounds)) * 1e3, float(np.median(cold)) * 1e3


if __name__ == "__main__":
    main()
