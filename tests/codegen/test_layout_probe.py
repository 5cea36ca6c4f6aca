"""benchmarks/layout_probe.py on a small shape: both kernels build, run and
match numpy (the probe that docs/performance.md quotes)."""

import importlib.util
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _probe():
    spec = importlib.util.spec_from_file_location("layout_probe", os.path.join(ROOT, "benchmarks", "layout_probe.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_layout_probe_runs_both_layouts(capsys):
    from braze.threads import current_threads

    # at the pool's current size: the probe sets it, for the tests after this one too
    _probe().main(["--shapes", "32x32x8", "--threads", str(current_threads())])
    out = capsys.readouterr().out
    errors = [float(e) for e in re.findall(r"err ([0-9.e+-]+)", out)]
    assert "NCHW" in out and "braze NCHW" in out, out
    assert len(errors) >= 2 and max(errors) < 1e-5, out
