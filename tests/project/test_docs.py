"""The docs stay true: generated sections match the code."""

from pathlib import Path

from braze.ir.doc import BEGIN, END, op_table_markdown

DOCS = Path(__file__).parents[2] / "docs"


def test_ir_op_table_is_current():
    text = (DOCS / "ir.md").read_text()
    table = text[text.index(BEGIN): text.index(END) + len(END)]
    assert table == op_table_markdown(), "regenerate docs/ir.md's table: braze ops --markdown"


def test_importer_onnx_table_is_current():
    from braze.frontend.registry import ONNX_BEGIN, ONNX_END, onnx_table_markdown

    text = (DOCS / "importer.md").read_text()
    table = text[text.index(ONNX_BEGIN): text.index(ONNX_END) + len(ONNX_END)]
    assert table == onnx_table_markdown(), "regenerate docs/importer.md's table: braze ops --markdown"


def test_conformance_table_is_the_results_file():
    """docs/conformance.md's table is generated from
    benchmarks/results/conformance.json (benchmarks/conformance.py --update-docs)."""
    import importlib.util
    import json

    path = Path(__file__).parents[2] / "benchmarks" / "conformance.py"
    spec = importlib.util.spec_from_file_location("conformance_script", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    text = (DOCS / "conformance.md").read_text()
    table = text[text.index(script.TABLE_BEGIN) + len(script.TABLE_BEGIN): text.index(script.TABLE_END)]
    data = json.loads(script.RESULTS.read_text())
    assert table.strip() == script.markdown_table(data).strip(), "rerun benchmarks/conformance.py --update-docs"
    plain = data["summary"]["plain"]
    assert plain["braze"] >= plain["onnxruntime"]  # issue 40's acceptance, on the recorded run


def _blocks(text: str, language: str) -> list[str]:
    import re

    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def _run_blocks(tmp_path, bash: list[str], python: list[str]) -> str:
    """Run shell and Python blocks of a doc, as written, in a fresh folder
    where braze/data is the shipped models; the shell output."""
    import os
    import subprocess
    import sys

    # braze/ here is the package itself (so braze/data is the shipped models, and `import braze` from
    # this folder finds the package, not a bare folder of that name)
    (tmp_path / "braze").symlink_to(Path(__file__).parents[2] / "braze")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-c", "set -e\n" + "\n".join(bash)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    for block in python:
        ran = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                             env=env)
        assert ran.returncode == 0, block + ran.stderr[-2000:]
    return done.stdout


def test_readme_tour_runs_as_written(tmp_path):
    """Every command of README.md's tour, and its Python snippet."""
    text = (Path(__file__).parents[2] / "README.md").read_text()
    assert len(text.splitlines()) <= 90
    tour = text[text.index("## A tour"):]
    out = _run_blocks(tmp_path, _blocks(tour, "bash")[:1], _blocks(tour, "python"))
    assert "latency: median" in out and "FLOPs" in out


def test_usage_commands_run_as_written(tmp_path):
    """Every ```bash and ```python block of docs/usage.md (a synopsis with
    placeholders is ```text)."""
    text = (DOCS / "usage.md").read_text()
    bash, python = _blocks(text, "bash"), _blocks(text, "python")
    assert len(bash) >= 3 and len(python) >= 2
    out = _run_blocks(tmp_path, bash, python)
    assert "cnn.int8.braze: " in out and "gears" in out
    assert (tmp_path / "fused.html").exists() and (tmp_path / "trace.json").exists()


def _anchors(text: str) -> set[str]:
    """GitHub's anchors for a Markdown file's headings."""
    import re

    text = re.sub(r"```.*?```", "", text, flags=re.S)
    slugs = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = sum(s == slug or re.fullmatch(re.escape(slug) + r"-\d+", s) is not None for s in slugs)
        slugs.add(f"{slug}-{n}" if n else slug)
    return slugs


def test_relative_links_resolve():
    """Every relative link of docs/ and README.md names a file that exists and, with #anchor, a
    heading of it."""
    import re

    root = DOCS.parent
    broken = []
    for path in [root / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                broken.append(f"{path.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text()):
                broken.append(f"{path.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_sections_cited_from_code_exist():
    """Code, benchmarks and tests cite docs as ``docs/NAME.md, "Section"``: each names a heading
    (or a paragraph's bold lead) of that doc."""
    import re

    root = DOCS.parent
    broken = []
    for path in sorted([*root.glob("braze/**/*.py"), *root.glob("benchmarks/**/*.py"), *root.glob("tests/**/*.py")]):
        text = path.read_text()
        for doc, section in re.findall(r"(docs/[a-z][a-z0-9_-]*\.md),\s*\"\s*([^\"]+?)\s*\"", text):
            section = " ".join(section.split())
            target = root / doc
            if not target.exists():
                broken.append(f"{path.relative_to(root)}: {doc} (no such file)")
                continue
            body = target.read_text()
            titles = re.findall(r"^#+\s*(.+)$", body, re.M) + re.findall(r"^\*\*([^*]+)\*\*", body, re.M)
            if not any(section.lower() in " ".join(t.split()).lower() for t in titles):
                broken.append(f"{path.relative_to(root)}: {doc}, \"{section}\" (no such section)")
    assert not broken, "\n".join(broken)
