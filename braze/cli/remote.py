"""``--rpc HOST:PORT --key KEY`` for the commands that run an artifact (run,
bench, profile): the options, and what each command does with them
(braze.runtime.remote does the work; docs/performance.md, "Tuning on many
machines")."""

from __future__ import annotations

import json
import os

from ..errors import InputError


def rpc_options(s) -> None:
    g = s.add_argument_group("on another machine, through a TVM RPC tracker (docs/performance.md)")
    g.add_argument("--rpc", metavar="HOST:PORT", help="the tracker: the artifact's lib.so is uploaded to a free "
                   "server of --key and run there")
    g.add_argument("--key", help="with --rpc: the device key the servers registered under")


def tracker_from_args(args):
    """The tracker of ``--rpc``/``--key``, or None without ``--rpc``."""
    from ..codegen.remote import Tracker

    if not getattr(args, "rpc", None):
        if getattr(args, "key", None):
            raise InputError("--key names the servers of a tracker: give the tracker with --rpc HOST:PORT")
        return None
    return Tracker.parse(args.rpc, args.key)


def run_over_rpc(args, tracker) -> dict:
    """``braze run --rpc``: the outputs, computed on a server."""
    from ..measure import load_inputs
    from ..runtime import load
    from ..runtime.remote import run_remote

    artifact = load(args.artifact, check_target=False)  # the server's CPU is checked instead
    return run_remote(artifact, tracker, load_inputs(args.inputs))


def bench_over_rpc(args, tracker, inputs_for) -> int:
    """``braze bench --rpc``: the artifact's latency on a server (an ONNX
    model is compiled here first, for --target)."""
    import tempfile

    from ..runtime import load
    from ..runtime.remote import bench_remote
    from .common import compile_from_args, gear_inputs

    if args.model.endswith(".onnx"):
        path = compile_from_args(args).save(os.path.join(tempfile.mkdtemp(prefix="braze-bench-"), "model.braze"))
    else:
        path = args.model
    artifact = load(path, check_target=False)
    result = bench_remote(artifact, tracker, inputs_for(args, gear_inputs(artifact, args.gear)), args.threads,
                          repeat=args.repeat)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.table())
    return 0


def profile_over_rpc(args, tracker, inputs_for) -> int:
    """``braze profile --rpc``: the whole model's time on a server. Per-kernel
    times are not there: TVM 0.27's VM times kernels through an instrument
    callback, and RPC cannot send a function to the server."""
    from ..runtime import load
    from ..runtime.remote import bench_remote
    from .common import gear_inputs

    artifact = load(args.artifact, check_target=False)
    result = bench_remote(artifact, tracker, inputs_for(args, gear_inputs(artifact, args.gear)),
                          repeat=max(args.repeat, 10))
    why = ("per-kernel times are not available over RPC (the VM's instrument hook takes a Python function, "
           f"which TVM's RPC cannot send); `braze profile {args.artifact}` on that machine gives them")
    if args.json:
        print(json.dumps({"total_ms": result.braze_ms, "kernels": None, "remote": result.to_dict()["remote"],
                          "threads": result.threads, "note": why}, indent=2))
    else:
        print(f"total {result.braze_ms:.3f} ms (median of {len(result.times_ms)} runs) on a '{tracker.key}' server "
              f"of {tracker} ({result.cpu or 'CPU not reported'}), {result.threads} thread(s)\n{why}")
    return 0
