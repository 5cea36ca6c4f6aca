"""Import every .onnx model in a folder, check print -> parse -> print identity,
canonicalize, and report op counts and times.

The full-size models come from the project's model generator (shared/models/
make_models.py; keep them outside the repo), e.g.:

    python benchmarks/check_models.py ~/.cache/braze-models
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from braze.errors import BrazeError
from braze.frontend import import_onnx
from braze.ir import parse_module, print_module, verify
from braze.passes import PassManager


def check(path: Path) -> dict:
    t0 = time.perf_counter()
    module = import_onnx(path)
    t1 = time.perf_counter()
    text = print_module(module)
    same = print_module(verify(parse_module(text, blobs=module.blobs))) == text
    before = Counter(op.name for op in module.walk())
    PassManager.parse("canonicalize,cse,dce").run(module)
    t2 = time.perf_counter()
    after = Counter(op.name for op in module.walk())
    text2 = print_module(module)
    same2 = print_module(verify(parse_module(text2, blobs=module.blobs))) == text2
    return {"model": path.stem, "import_s": t1 - t0, "canon_s": t2 - t1, "roundtrip": same and same2,
            "ops_before": sum(v for k, v in before.items() if k not in ("const", "func.return")),
            "ops_after": sum(v for k, v in after.items() if k not in ("const", "func.return")),
            "shape_ops_left": after["tensor.shape"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path)
    args = ap.parse_args()
    ok = True
    print("| model | import s | canonicalize s | ops before | ops after | shape ops left | round trip |")
    print("|---|---|---|---|---|---|---|")
    for folder in args.folders:
        for path in sorted(folder.glob("*.onnx")):
            try:
                r = check(path)
            except BrazeError as e:
                print(f"| {path.stem} | error: {e} |")
                ok = False
                continue
            ok &= r["roundtrip"] and not r["shape_ops_left"]
            print(f"| {r['model']} | {r['import_s']:.2f} | {r['canon_s']:.2f} | {r['ops_before']} | "
                  f"{r['ops_after']} | {r['shape_ops_left']} | {'yes' if r['roundtrip'] else 'NO'} |")
            sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
