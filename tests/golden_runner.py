"""Golden text tests, one file per pass or importer area, after MLIR's lit.

File format (``tests/golden/**/*.mlir``)::

    // RUN: canonicalize,dce          <- a pass pipeline, or `import` (input is
    <input text>                          ONNX text syntax), or `roundtrip`
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

GOLDEN = Path(__file__).parent / "golden"


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

    if case.run == "import":
        import onnx

        from braze.frontend import import_onnx

        model = onnx.parser.parse_model(case.input)
        return print_module(import_onnx(model))
    module = verify(parse_module(case.input, str(case.path)))
    if case.run == "roundtrip":
        return print_module(module)
    from braze.passes import PassManager

    PassManager.parse(case.run).run(module)
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
