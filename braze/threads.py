"""TVM's CPU thread pool: its size and how long its idle workers spin.

Size. TVM sizes its pool once, when it first starts, from TVM_NUM_THREADS
(half the cores when unset); later it can only shrink it. braze therefore
sets TVM_NUM_THREADS to all cores before TVM starts, and narrows the pool to
what the user asks for.

Spin. After each parallel kernel, TVM's workers busy-wait (``sched_yield``
in a loop) for TVM_THREAD_POOL_SPIN_COUNT iterations before they sleep, so
that the next kernel of the same run finds them awake. TVM's own count
keeps every worker burning a core long after each run: on a machine with
few cores that steals the cores of whatever runs next. braze's default,
``short``, spins long enough to bridge the gaps between the kernels of one
run and goes quiet soon after the run's end; ``long`` is
TVM's count, for back-to-back runs at any CPU cost (docs/usage.md, "Idle
threads"). TVM reads the count once per process, when its pool first runs a
kernel: it must be chosen before that.
"""

from __future__ import annotations

import os

from .errors import RuntimeOptionError

os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count() or 1))

SPIN_ENV = "TVM_THREAD_POOL_SPIN_COUNT"
#: Named spin counts (iterations of ``sched_yield``): ``short`` bridges the
#: gaps between one run's kernels, ``long`` is TVM's own count.
SPINS = {"off": 0, "short": 1000, "long": 300000}
DEFAULT_SPIN = "short"

os.environ.setdefault(SPIN_ENV, str(SPINS[DEFAULT_SPIN]))

#: Set once a model has run in this process: TVM has read the spin count by then.
_pool_started = False


def apply_threads(n: int | None) -> None:
    """Use ``n`` threads (None: every core the pool was started with)."""
    if not n:
        return
    import tvm

    tvm.get_global_func("runtime.config_threadpool")(1, int(n))


def current_threads() -> int:
    import tvm

    return tvm.runtime.num_threads()


def spin_count(spin) -> int:
    """``"off"``, ``"short"``, ``"long"`` or a whole number of iterations -> the count."""
    if isinstance(spin, str) and spin.strip().lower() in SPINS:
        return SPINS[spin.strip().lower()]
    try:
        count = int(spin)
    except (TypeError, ValueError):
        count = -1
    if isinstance(spin, bool) or count < 0 or str(count) != str(spin).strip():
        raise RuntimeOptionError(f"spin must be off, short, long or a whole number of spin iterations, "
                                 f"not {spin!r}")
    return count


def set_spin(spin) -> int:
    """How long TVM's idle workers spin after each parallel kernel (see the
    module's docstring). Must come before the first model runs in this
    process; afterwards only the count already in force is accepted."""
    count = spin_count(spin)
    current = os.environ.get(SPIN_ENV)
    if _pool_started and current != str(count):
        raise RuntimeOptionError(
            f"cannot change spin to {spin} ({count} iterations): a model has already run in this process "
            f"with {current} (TVM reads the count once per process, when its thread pool starts); "
            f"set spin before the first run, or run in a new process")
    os.environ[SPIN_ENV] = str(count)
    return count


def current_spin() -> int:
    """The spin count in force (or that will be, when the pool starts)."""
    return spin_count(os.environ.get(SPIN_ENV, str(SPINS[DEFAULT_SPIN])))


def note_pool_started() -> None:
    global _pool_started
    _pool_started = True
