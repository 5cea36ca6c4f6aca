"""Ctrl-C: braze's one mechanism for it, for builds and for the command line.

During a build, Ctrl-C stays a KeyboardInterrupt.

TVM's FFI turns a KeyboardInterrupt raised while C++ code runs (LLVM
codegen, a TIR pass) into a bare ``RuntimeError``, which the build's
"TVM could not build this" handlers would otherwise report as a
CodegenError, or even survive (a schedule falling back to the generic one, a
fused group split back into single ops). ``watch()`` notes SIGINT while a
build runs (then hands it to the handler that was there: Python's raises
KeyboardInterrupt, the CLI's sets its own flag); ``check()``, at the top of
each such handler, raises KeyboardInterrupt when one was noted.

On the command line, ``install()`` sets a SIGINT handler that remembers the
Ctrl-C for the whole command (``received()``) and raises KeyboardInterrupt:
a build that swallowed it (TVM's C++ code can return it as an error that
fusion recovers from) still stops at the next step (``stop_if_received()``),
and never writes an output.
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


# --- the command line: one Ctrl-C remembered for the whole command ---------------------------------
_received = False


def install() -> None:
    """Handle SIGINT by remembering it and raising KeyboardInterrupt (where
    Python's default handler is in place), and forget an earlier command's."""
    global _received
    _received = False
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)


def _on_sigint(signum, frame):
    global _received
    _received = True
    raise KeyboardInterrupt


def received() -> bool:
    """Whether Ctrl-C came since ``install()``."""
    return _received


def stop_if_received() -> None:
    """Raise KeyboardInterrupt if Ctrl-C came since ``install()``."""
    if _received:
        raise KeyboardInterrupt
