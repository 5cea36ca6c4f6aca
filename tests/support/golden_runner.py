"""Golden text tests, one file per pass or importer area, after MLIR's lit.

File format (``tests/golden/**/*.mlir``)::

    // RUN: canonicalize,dce          <- a pass pipeline, `roundtrip`, or `import`
    <input text>                          (input in ONNX text syntax), optionally
                                          followed by `| PIPELINE`
    // CHECK:
    <the exact expected IR text>
    // -----                          <- next case; a case may have its own RUN
    <input>
    // ERROR: use of undefined value  <- expect a BrazeError containing this

Every case's output, and every CHECK text, must also round-trip through the
printer and parser unchanged. ``BRAZE_UPDATE_GOLDEN=1`` rewrites the CHECK
texts from the current output (review the diff before committing).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

GOLDEN = Path(__file__).parents[1] / "golden"


@dataclass
class Case:
    path: Path
    index: int
    run: str
    input: str
    check: str | None
    error: str | None

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(GOLDEN)}#{self.index}"


def read_cases(path: Path) -> list[Case]:
    text = path.read_text()
    chunks = re.split(r"^// -----\s*$", text, flags=re.M)
    default_run = None
    cases = []
    for i, chunk in enumerate(chunks):
        run = re.search(r"^// RUN:\s*(.*)$", chunk, flags=re.M)
        if run:
            if i == 0:
                default_run = run.group(1).strip()
            run_text = run.group(1).strip()
        else:
            run_text = default_run
        error = re.search(r"^// ERROR:\s*(.*)$", chunk, flags=re.M)
        parts = re.split(r"^// CHECK:\s*$", chunk, maxsplit=1, flags=re.M)
        body = "\n".join(l for l in parts[0].splitlines() if not l.startswith("// ")).strip()
        if not body:
            continue
        check = parts[1].strip() if len(parts) > 1 else None
        if check is None and error is None:
            raise AssertionError(f"{path} case {i}: no // CHECK: and no // ERROR:")
        cases.append(Case(path, i, run_text or "roundtrip", body, check, error.group(1).strip() if error else None))
    return cases


def all_cases() -> list[Case]:
    return [c for p in sorted(GOLDEN.rglob("*.mlir")) for c in read_cases(p)]


def run_case(case: Case) -> str:
    """The IR text the case's RUN produces from its input."""
    from braze.ir import parse_module, print_module, verify

    source, _, pipeline = (s.strip() for s in case.run.partition("|"))
    if source == "import":
        import onnx

        from braze.frontend import import_onnx

        module = import_onnx(onnx.parser.parse_model(case.input))
    else:
        module = verify(parse_module(case.input, str(case.path)))
        pipeline = "" if source == "roundtrip" else source
    if pipeline:
        from braze.passes import PassManager

        PassManager.parse(pipeline).run(module)
    return print_module(module)


def update(case: Case, output: str) -> None:
    """Rewrite the CHECK text of one case in place."""
    text = case.path.read_text()
    chunks = re.split(r"(^// -----\s*$)", text, flags=re.M)
    k = case.index * 2
    head = re.split(r"^// CHECK:\s*$", chunks[k], maxsplit=1, flags=re.M)[0]
    chunks[k] = head.rstrip("\n") + "\n// CHECK:\n" + output.strip() + "\n\n"
    case.path.write_text("".join(chunks))


UPDATE = os.environ.get("BRAZE_UPDATE_GOLDEN") == "1"
