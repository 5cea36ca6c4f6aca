"""braze's layers point only down (docs/overview.md, "Code layout").

Each module of ``braze`` belongs to a layer; it may import its own package
and any layer below its own. Layers that hold siblings say whether they may
import each other (``frontend`` and ``passes`` may not: fusion must not need
the importer). onnx, onnxruntime and tvm are imported only where listed. No
module imports itself again through others: on load, module by module; and
between top-level modules, through any import at all.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "braze"

#: Lowest first. A layer is (names of top-level modules or packages, open):
#: in an open layer its members may import each other.
LAYERS = [
    ({"errors", "version", "interrupts"}, False),
    ({"threads"}, True),  # TVM's pool settings, set before tvm loads
    ({"ir"}, True),
    ({"frontend", "passes"}, False),
    ({"targets"}, True),
    ({"codegen"}, True),
    ({"runtime"}, True),
    ({"pipeline"}, True),
    ({"compiler"}, True),
    ({"reference"}, True),  # onnxruntime sessions, for measure and timing
    ({"timing"}, True),
    ({"measure"}, True),
    ({"tools", "session", "backend"}, False),
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


def _imports(source, package: list[str], skip=frozenset()):
    """(line, braze module as a list of names, or None; third-party top name or None)
    of a file (a Path, or its parsed tree), leaving out the import nodes whose
    ``id`` is in ``skip`` (ids of that same tree). ``from .x import a, b``
    gives ``x.a`` and ``x.b``: a name of a module is not told from a module here."""
    tree = ast.parse(source.read_text()) if isinstance(source, Path) else source
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "braze":
                base = node.module.split(".")[1:]
            else:
                if node.module:
                    yield node.lineno, None, node.module.split(".")[0]
                continue
            for alias in node.names:
                yield node.lineno, base + [alias.name], None
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
    assert (1, ["compiler", "compile"], None) in found and (2, None, "onnx") in found
    assert _layer(_top(["compiler"])) > _layer("codegen")


def _type_checking_only(tree) -> set[int]:
    """The ids of the nodes under ``if TYPE_CHECKING`` (annotations only: never run)."""
    return {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)}


#: The only imports allowed to close a loop: a registry loading, when first
#: asked, the modules that register into it (and so import it). Each is a
#: function-level import of a whole plugin package.
PLUGIN_LOADS = {
    (("ir", "registry"), ("ir", "ops")),
    (("frontend", "registry"), ("frontend", "converters")),
    (("codegen", "registry"), ("codegen", "lowerings")),
    (("passes", "manager"), ("passes", "builtin")),
}


def _module(parts: list[str]) -> tuple[str, ...]:
    """The braze module an import names: ``from .x import y`` names module
    ``x.y`` if there is one, else ``x`` (y is one of its names); a package
    is its ``__init__``."""
    *package, last = parts or [""]
    whole = ROOT.joinpath(*parts) if parts else ROOT
    if (whole / "__init__.py").is_file() or whole.with_suffix(".py").is_file():
        return tuple(parts)
    return tuple(package) if last else ()


def _cycles(edges: dict) -> list[list]:
    """The strongly connected components of more than one node (Tarjan's)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    found = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def _module_edges() -> dict[tuple, set[tuple]]:
    """braze module -> the braze modules it imports, at any depth (under
    ``if TYPE_CHECKING`` left out), but ``PLUGIN_LOADS``."""
    edges: dict[tuple, set[tuple]] = {}
    for path, parts, package in _modules():
        ours = tuple(parts[:-1]) if parts[-1] == "__init__" else tuple(parts)
        tree = ast.parse(path.read_text())
        for _, target, _ in _imports(tree, package, _type_checking_only(tree)):
            if target is not None and _module(target) != ours and (ours, _module(target)) not in PLUGIN_LOADS:
                edges.setdefault(ours, set()).add(_module(target))
    return edges


def test_no_import_cycle_between_modules():
    """No braze module imports itself again through others, along a loop of
    any length: every import counts, in a function or not (ir/core.py and
    ir/printer.py once did, through a function-level import), except
    under ``if TYPE_CHECKING`` and a registry's ``PLUGIN_LOADS``."""
    cycles = _cycles(_module_edges())
    assert not cycles, "modules that import each other: " + "; ".join(
        " <-> ".join(".".join(m) or "braze" for m in c) for c in cycles)


def test_no_import_cycle_between_top_level_modules():
    """Top-level modules and packages import each other one way only
    (measure.py and timing.py once did, through a function-level import):
    every import counts here, at any depth and along any loop, except
    under ``if TYPE_CHECKING``."""
    edges: dict[str, set[str]] = {}
    for path, parts, package in _modules():
        ours = _top(parts)
        tree = ast.parse(path.read_text())
        for _, target, _ in _imports(tree, package, skip=_type_checking_only(tree)):
            if target and _top(target) != ours:
                edges.setdefault(ours, set()).add(_top(target))
    cycles = _cycles(edges)
    assert not cycles, f"top-level modules that import each other: {cycles}"


def test_the_cycle_checks_see_a_loop(tmp_path):
    """The check itself: a loop of three is found; a function-level import
    counts; ``from . import x`` names module x."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert not _cycles({"a": {"b"}, "b": {"c"}})
    (tmp_path / "lazy.py").write_text("def f():\n    from . import timing\n")
    assert [_module(t) for _, t, _ in _imports(tmp_path / "lazy.py", [])] == [("timing",)]
