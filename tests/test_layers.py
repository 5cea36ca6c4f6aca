"""braze's layers point only down (docs/overview.md, "Code layout").

Each module of ``braze`` belongs to a layer; it may import its own package
and any layer below its own. Two layers hold sibling packages that must not
import each other (``frontend`` and ``passes``: fusion must not need the
importer). onnx, onnxruntime and tvm are imported only where listed.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "braze"

#: Lowest first. A layer is (names of top-level modules or packages, open):
#: in an open layer its members may import each other.
LAYERS = [
    ({"errors", "threads", "version", "interrupts"}, True),  # threads: TVM's pool settings, set before tvm loads
    ({"ir"}, True),
    ({"frontend", "passes"}, False),
    ({"targets"}, True),
    ({"codegen"}, True),
    ({"runtime"}, True),
    ({"compiler", "pipeline"}, True),
    ({"tools", "measure", "timing", "reference", "session", "backend"}, True),
    ({"cli", "__init__", "__main__"}, True),
]

#: Where each heavy third-party library may be imported (top-level names).
LIBRARIES = {
    "tvm": {"threads", "targets", "codegen", "runtime", "tools"},  # targets: LLVM's name and features of the host
    "tvm_ffi": {"codegen", "runtime"},
    "onnx": {"frontend", "backend", "tools", "measure", "cli"},
    "onnxruntime": {"measure", "reference", "tools"},
}


def _layer(top: str) -> int:
    return next(i for i, (names, _) in enumerate(LAYERS) if top in names)


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        yield path, parts, parts[:-1]  # a module's package; for __init__.py, the package itself


def _imports(path: Path, package: list[str], skip=frozenset()):
    """(line, braze module as a list of names, or None; third-party top name or None),
    leaving out the import nodes whose ``id`` is in ``skip``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                names = base + (node.module.split(".") if node.module else [])
                if node.module is None:
                    for alias in node.names:
                        yield node.lineno, base + [alias.name], None
                else:
                    yield node.lineno, names, None
            elif node.module and node.module.split(".")[0] == "braze":
                yield node.lineno, node.module.split(".")[1:], None
            elif node.module:
                yield node.lineno, None, node.module.split(".")[0]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top == "braze":
                    yield node.lineno, alias.name.split(".")[1:], None
                else:
                    yield node.lineno, None, top


def _top(parts: list[str]) -> str:
    """The top-level module or package; a name that is neither (``from . import
    __version__``) is an attribute of braze's ``__init__``."""
    if not parts or not ((ROOT / parts[0]).is_dir() or (ROOT / f"{parts[0]}.py").is_file()):
        return "__init__"
    return parts[0]


def test_every_module_has_a_layer():
    tops = {_top(parts) for _, parts, _ in _modules()} - {"data"}
    assert not {t for t in tops if not any(t in names for names, _ in LAYERS)}


def test_imports_point_down():
    upward = []
    for path, parts, package in _modules():
        ours = _top(parts)
        for line, target, _ in _imports(path, package):
            if not target:
                continue
            theirs = _top(target)
            i, j = _layer(ours), _layer(theirs)
            if j > i or (j == i and ours != theirs and not LAYERS[i][1]):
                upward.append(f"braze/{path.relative_to(ROOT)}:{line} imports braze.{'.'.join(target)}")
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def test_heavy_libraries_stay_where_they_belong():
    misplaced = []
    for path, parts, package in _modules():
        for line, _, library in _imports(path, package):
            if library in LIBRARIES and _top(parts) not in LIBRARIES[library]:
                misplaced.append(f"braze/{path.relative_to(ROOT)}:{line} imports {library}")
    assert not misplaced, "\n".join(misplaced)


def test_the_checker_sees_an_upward_import(tmp_path):
    """The check itself: a codegen module importing the compiler is caught."""
    (tmp_path / "bad.py").write_text("from ..compiler import compile\nimport onnx\n")
    found = list(_imports(tmp_path / "bad.py", ["codegen"]))
    assert (1, ["compiler"], None) in found and (2, None, "onnx") in found
    assert _layer(_top(["compiler"])) > _layer("codegen")


def test_no_import_cycle_between_top_level_modules():
    """Two modules of one open layer may import each other's names, but not
    both ways (measure.py and timing.py once did, through a function-level
    import): every import counts here, at any depth, except under
    ``if TYPE_CHECKING``."""
    edges: dict[str, set[str]] = {}
    for path, parts, package in _modules():
        ours = _top(parts)
        skipped = {id(n) for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for n in ast.walk(node)}
        for line, target, _ in _imports(path, package, skip=skipped):
            if target and _top(target) != ours:
                edges.setdefault(ours, set()).add(_top(target))
    cycles = sorted({tuple(sorted((a, b))) for a, outs in edges.items() for b in outs if a in edges.get(b, ())})
    assert not cycles, f"top-level modules that import each other: {cycles}"
