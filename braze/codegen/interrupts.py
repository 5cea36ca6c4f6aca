"""Ctrl-C during a build stays a KeyboardInterrupt.

TVM's FFI turns a KeyboardInterrupt raised while C++ code runs (LLVM
codegen, a TIR pass) into a bare ``RuntimeError``, which the build's
"TVM could not build this" handlers would otherwise report as a
CodegenError, or even survive (a schedule falling back to the generic one, a
fused group split back into single ops). ``watch()`` notes SIGINT while a
build runs (then hands it to the handler that was there: Python's raises
KeyboardInterrupt, the CLI's sets its own flag); ``check()``, at the top of
each such handler, raises KeyboardInterrupt when one was noted.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

_noted = False


@contextmanager
def watch():
    """Note SIGINT for the duration (main thread only: signals are handled there)."""
    global _noted
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous in (signal.SIG_IGN, None):
        yield
        return

    def note(signum, frame):
        global _noted
        _noted = True
        if callable(previous):
            previous(signum, frame)
        else:  # SIG_DFL: what Python's own handler does
            raise KeyboardInterrupt

    _noted = False
    signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _noted = False


def check() -> None:
    """Raise KeyboardInterrupt if SIGINT came during the watched build."""
    if _noted:
        raise KeyboardInterrupt
