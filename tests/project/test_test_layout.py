"""The test suite's own layout (docs/testing.md): one folder per layer, and
shared helpers in tests/support/, never imported from another test module."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
LAYERS = {"ir", "frontend", "passes", "codegen", "runtime", "cli", "end_to_end", "project"}


def test_every_test_module_sits_in_a_layer_folder():
    misplaced = [str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py") if p.parent.name not in LAYERS]
    assert not misplaced, f"move these into one of {sorted(LAYERS)}: {misplaced}"


def test_no_test_module_imports_another():
    found = []
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            found += [f"{path.relative_to(TESTS)}: {n}" for n in names if n.split(".")[0].startswith("test_")]
    assert not found, "shared helpers belong in tests/support/:\n" + "\n".join(found)
