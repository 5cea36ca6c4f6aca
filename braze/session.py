"""``braze.InferenceSession``: onnxruntime's session API over a braze artifact.

An onnxruntime user switches by changing one import::

    import braze as ort            # was: import onnxruntime as ort
    sess = ort.InferenceSession("model.onnx")
    x = sess.get_inputs()[0]
    (y,) = sess.run(None, {x.name: data})

An ONNX model (path, bytes or ModelProto) is compiled at construction,
through the build cache (``cache_dir``: ``BRAZE_CACHE_DIR`` or
``~/.cache/braze/builds``; ``cache_dir=False`` compiles afresh), so a second
session on the same model and options loads the earlier build. A path to a
saved artifact (a ``.braze`` folder) is loaded. braze's own options
(``target``, ``level``, ``fusion``, ``input_shapes``, ``threads``, and
the gears: ``dynamic_batch``, ``dynamic_dims``, ``gears``, ``pad_batch``) are
keywords; onnxruntime's ``sess_options`` gives the threads
(``intra_op_num_threads``). ``providers`` does not choose where the
kernels run, the target does: a provider other than CPU and CUDA, or CUDA
with a CPU target, is a warning that says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError

#: onnxruntime's type names for numpy dtypes
_ORT_TYPES = {"float32": "float", "float64": "double", "bool": "bool"}


@dataclass(frozen=True)
class NodeArg:
    """An input or output as onnxruntime describes it: ``name``, ``shape``
    (a list of ints) and ``type`` (``"tensor(float)"``)."""

    name: str
    shape: list
    type: str


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "braze", "builds")


def _node_arg(spec: dict) -> NodeArg:
    dtype = spec["dtype"]
    return NodeArg(spec["name"], list(spec["shape"]), f"tensor({_ORT_TYPES.get(dtype, dtype)})")


def _is_artifact(model) -> bool:
    return isinstance(model, (str, os.PathLike)) and (Path(model) / "manifest.json").is_file()


class InferenceSession:
    """A compiled (or loaded) model run the way onnxruntime runs one.

    Example::

        sess = braze.InferenceSession("model.onnx")
        x = sess.get_inputs()[0]
        (y,) = sess.run(None, {x.name: data})
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, *,
                 target="cpu", level: int = 2, fusion=None, input_shapes=None, threads: int | None = None,
                 cache_dir: str | bool | None = None, **gears):
        """Compile ``path_or_bytes`` (an ONNX path, bytes or ModelProto),
        or load it (a saved ``.braze`` artifact folder).

        Args:
            sess_options: onnxruntime's ``SessionOptions``; its
                ``intra_op_num_threads`` gives the threads.
            providers: onnxruntime's execution providers; braze runs on
                ``target`` whatever they say (a warning says so when they
                ask for something else).
            provider_options: accepted for onnxruntime's signature; unused.
            target, level, fusion, input_shapes, threads: as ``braze.compile``.
            cache_dir: the build cache (default ``BRAZE_CACHE_DIR`` or
                ``~/.cache/braze/builds``); False compiles afresh.
            dynamic_batch, dynamic_dims, gears, pad_batch: gears, as
                ``braze.compile``.

        Raises:
            BrazeError: a typed error (``OnnxImportError``, ``ModelLoadError``,
                ``ArtifactError``, ...) naming the file, node or option.

        Example::

            sess = braze.InferenceSession("model.onnx", level=3)
            (y,) = sess.run(None, {"x": x})
        """
        _check_providers(providers, target)
        if threads is None and sess_options is not None:
            threads = getattr(sess_options, "intra_op_num_threads", 0) or None
        if _is_artifact(path_or_bytes):
            from .runtime import load

            self._artifact = load(os.fspath(path_or_bytes))
            if threads:
                self._artifact.manifest["threads"] = threads  # this session's, applied at its first run
        else:
            from .compiler import compile as braze_compile

            cache = None if cache_dir is False else (cache_dir or os.environ.get("BRAZE_CACHE_DIR")
                                                     or default_cache_dir())
            unknown = sorted(set(gears) - {"dynamic_batch", "dynamic_dims", "gears", "pad_batch"})
            if unknown:
                raise TypeError(f"InferenceSession got unexpected keyword argument(s) {', '.join(unknown)}")
            self._artifact = braze_compile(path_or_bytes, target=target, level=level, fusion=fusion,
                                           input_shapes=input_shapes, threads=threads, cache_dir=cache, **gears)
        self._providers = list(providers or [])

    @property
    def artifact(self):
        """The braze ``Artifact`` behind the session (``.save(path)`` to deploy it)."""
        return self._artifact

    def get_inputs(self) -> list[NodeArg]:
        """The model's inputs as onnxruntime lists them: ``NodeArg(name,
        shape, type)``, e.g. ``NodeArg("x", [1, 3, 224, 224], "tensor(float)")``."""
        return [_node_arg(s) for s in self._artifact.inputs]

    def get_outputs(self) -> list[NodeArg]:
        """The model's outputs, as ``get_inputs`` lists the inputs."""
        return [_node_arg(s) for s in self._artifact.outputs]

    def get_providers(self) -> list[str]:
        """Where the kernels run: ``["braze:<target>"]``, e.g. ``["braze:cpu"]``."""
        return [f"braze:{self._artifact.manifest['target']['name']}"]

    def run(self, output_names, input_feed: dict, run_options=None) -> list:
        """The outputs named in ``output_names`` (all of them for None or
        an empty list), in that order, as numpy arrays."""
        results = self._artifact.run(input_feed)
        names = list(output_names) if output_names else [o["name"] for o in self._artifact.outputs]
        unknown = [n for n in names if n not in results]
        if unknown:
            raise InputError(f"no output named {', '.join(map(repr, unknown))}; the model's outputs are "
                             f"{', '.join(results)}")
        return [results[n] for n in names]


_PROVIDERS = {"CPUExecutionProvider": "cpu", "CUDAExecutionProvider": "cuda"}


def _check_providers(providers, target) -> None:
    """A warning for providers that ask for something the target does not give."""
    import warnings

    from .errors import BrazeWarning

    kind = str(target).split("-")[0] if isinstance(target, str) else getattr(target, "kind", "cpu")
    for p in providers or []:
        name = p[0] if isinstance(p, (tuple, list)) else str(p)
        wanted = _PROVIDERS.get(name)
        if wanted is None:
            warnings.warn(f"provider '{name}' is not one braze has; braze runs the kernels it compiled for "
                          f"target '{target}' (CPUExecutionProvider and CUDAExecutionProvider map to the cpu and "
                          "cuda targets)", BrazeWarning, stacklevel=3)
        elif wanted == "cuda" and not kind.startswith("cuda"):
            warnings.warn(f"provider '{name}' asks for a GPU, but the target is '{target}': braze runs on the "
                          "target; pass target='cuda' to compile for the GPU", BrazeWarning, stacklevel=3)
