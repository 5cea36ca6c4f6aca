"""onnxruntime, the reference braze checks and times itself against: a
session made the one way verify, bench and profile need it (CPU, a thread
count, the model by path so that external data loads, typed errors)."""

from __future__ import annotations

from .errors import ReferenceRuntimeError, first_line


def ort_session(model, threads: int | None, profile_prefix: str | None = None):
    """An onnxruntime CPU session on ``threads`` intra-op threads (its
    profiler on, writing under ``profile_prefix``, when given). A model path
    goes to onnxruntime as a path, so that weights stored beside it
    (external data) load from its folder; a ReferenceRuntimeError says what
    onnxruntime could not do."""
    import os

    import onnxruntime as ort

    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    if profile_prefix:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    source = model.SerializeToString() if hasattr(model, "SerializeToString") else model
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    try:
        session = ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own types (Fail, InvalidGraph, ...)
        where = source if isinstance(source, str) else "the model"
        raise ReferenceRuntimeError(f"onnxruntime cannot load {where}: {first_line(e)}") from None
    return _CheckedSession(session)


class _CheckedSession:
    """An onnxruntime session whose ``run`` errors are ReferenceRuntimeErrors."""

    def __init__(self, session):
        self.session = session

    def __getattr__(self, name):
        return getattr(self.session, name)

    def run(self, names, feeds):
        try:
            return self.session.run(names, feeds)
        except Exception as e:  # a shape or type onnxruntime refuses
            raise ReferenceRuntimeError(f"onnxruntime cannot run the model on these inputs: {first_line(e)}") from None
