"""The TVM CPU thread pool.

TVM sizes its pool once, when it first starts, from TVM_NUM_THREADS (half
the cores when unset); later it can only shrink it. braze therefore sets
TVM_NUM_THREADS to all cores before TVM starts, and narrows the pool to what
the user asks for.
"""

from __future__ import annotations

import os

os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count() or 1))


def apply_threads(n: int | None) -> None:
    """Use ``n`` threads (None: every core the pool was started with)."""
    if not n:
        return
    import tvm

    tvm.get_global_func("runtime.config_threadpool")(1, int(n))


def current_threads() -> int:
    import tvm

    return tvm.runtime.num_threads()
