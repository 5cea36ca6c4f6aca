"""`braze explain --html` pages checked in a real headless browser.

    python benchmarks/html_check.py [--browser chromium] [--out html-check/]

For each shipped model (braze/data), writes the explain page at level 2,
opens it in headless Chromium (the distribution's package: `apt-get
install chromium`) and checks that it renders: the DOM the browser built
holds one `<g class="kernel">` per kernel and one `<path class="edge">` per
edge of the page, and its screenshot is not blank (its PNG is more than
three times the size of the same browser's screenshot of an empty page, the
control). Screenshots go to --out, which is not committed. Exit status 1 if
any check fails.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

MODELS = ("bert-tiny", "vit-tiny", "mobilenetv2-tiny", "cnn-dynamic")
SIZE = "1400,1800"


def browser_run(browser: str, *args: str) -> str:
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={SIZE}", *args],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{browser} failed: {done.stderr[-500:]}")
    return done.stdout


def check(browser: str, model: Path, out: Path, blank_bytes: int) -> dict:
    from braze.compiler import fuse_only
    from braze.passes.fusion.draw import to_html

    shapes = {"input": (2, 3, 32, 32)} if model.stem == "cnn-dynamic" else None  # its batch axis, bound
    module, report = fuse_only(str(model), level=2, input_shapes=shapes)
    page = out / f"{model.stem}.html"
    text = to_html(module, report)
    page.write_text(text)
    dom = browser_run(browser, "--dump-dom", page.as_uri())
    shot = out / f"{model.stem}.png"
    browser_run(browser, f"--screenshot={shot}", page.as_uri())
    row = {"model": model.stem, "kernels": report.kernels,
           "kernel_nodes": len(re.findall(r'<g class="kernel"', dom)),
           "edges_in_page": text.count('<path class="edge"'), "edges_rendered": len(re.findall(r'<path class="edge"', dom)),
           "screenshot_bytes": shot.stat().st_size, "blank_bytes": blank_bytes}
    row["ok"] = (row["kernel_nodes"] == row["kernels"] and row["edges_rendered"] == row["edges_in_page"] > 0
                 and row["screenshot_bytes"] > 3 * blank_bytes)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--browser", default=shutil.which("chromium") or shutil.which("chromium-browser") or "chromium")
    ap.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="braze-html-")))
    args = ap.parse_args()
    if not shutil.which(args.browser):
        print(f"no browser '{args.browser}': install the distribution's chromium package", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    blank = args.out / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    browser_run(args.browser, f"--screenshot={args.out / 'blank.png'}", blank.as_uri())
    blank_bytes = (args.out / "blank.png").stat().st_size
    data = Path(__file__).parent.parent / "braze" / "data"
    rows = [check(args.browser, data / f"{m}.onnx", args.out, blank_bytes) for m in MODELS]
    print(f"{'model':<18} {'kernels':>7} {'drawn':>5} {'edges':>5} {'drawn':>5} {'png KB':>7} {'blank KB':>8}  ok")
    for r in rows:
        print(f"{r['model']:<18} {r['kernels']:>7} {r['kernel_nodes']:>5} {r['edges_in_page']:>5} "
              f"{r['edges_rendered']:>5} {r['screenshot_bytes'] / 1e3:7.1f} {r['blank_bytes'] / 1e3:8.1f}  "
              f"{'yes' if r['ok'] else 'NO'}")
    print(f"screenshots in {args.out}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
