"""TVM 0.27's VM executable logs a warning line for every constant it saves or
loads ("Scope Saving:" / "Scope Loaded:"), thousands for a real model. This
filters exactly those lines out of the process's stderr around such calls and
passes everything else through."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

_NOISE = re.compile(rb"^\[[0-9:]+\] \S*executable\.cc:\d+: Warning: Scope (Saving|Loaded):\s*$")


@contextlib.contextmanager
def tvm_scope_logs_filtered():
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # stderr is not a real file (e.g. captured)
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), fd)
        try:
            yield
        finally:
            os.dup2(saved, fd)
            os.close(saved)
            capture.seek(0)
            kept = [line for line in capture.read().splitlines(keepends=True) if not _NOISE.match(line)]
            if kept:
                os.write(fd, b"".join(kept))
