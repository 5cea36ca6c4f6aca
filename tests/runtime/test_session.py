"""The public API: braze.compile/load/Target/FusionOptions, and
braze.InferenceSession, which runs the same script as onnxruntime's."""

import numpy as np
import onnxruntime
import pytest

import braze
from braze.errors import InputError
from models import tiny


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One build cache for the module: each model compiles once."""
    path = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BRAZE_CACHE_DIR", str(path))
        yield path


def script(ort, path):
    """What an onnxruntime user writes; ``ort`` is the module (onnxruntime or braze)."""
    options = ort.SessionOptions() if hasattr(ort, "SessionOptions") else onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        if i.type == "tensor(float)":
            feeds[i.name] = rng.standard_normal(i.shape).astype(np.float32)
        else:  # token ids, masks: small non-negative integers
            feeds[i.name] = rng.integers(0, 2, i.shape).astype(np.int64)
    described = ([(i.name, list(i.shape), i.type) for i in sess.get_inputs()],
                 [(o.name, o.type) for o in sess.get_outputs()])
    first = sess.get_outputs()[0].name
    return described, sess.run(None, feeds), sess.run([first], feeds)


@pytest.mark.parametrize("name", ["mobilenetv2-tiny", "bert-tiny"])
def test_the_same_script_runs_on_onnxruntime_and_braze(name, cache):
    ort_described, ort_all, ort_first = script(onnxruntime, tiny(name))
    ours_described, ours_all, ours_first = script(braze, tiny(name))
    assert ours_described == ort_described
    assert len(ours_all) == len(ort_all) and len(ours_first) == 1
    for ours, theirs in zip(ours_all + ours_first, ort_all + ort_first):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    assert list(cache.iterdir())  # compiled through the build cache


def test_compile_load_and_a_session_on_a_saved_artifact(cache, tmp_path):
    artifact = braze.compile(str(tiny("mobilenetv2-tiny")), target=braze.get_target("cpu"),
                             fusion=braze.FusionOptions(no_fuse=("Clip",)), max_group_size=4)
    assert isinstance(artifact, braze.Artifact) and isinstance(braze.get_target("cpu"), braze.Target)
    assert all(len(k["ops"]) <= 4 and "math.clip" not in k["ops"][1:] for k in artifact.kernels)
    saved = artifact.save(str(tmp_path / "m.braze"))
    assert braze.load(saved).manifest["kernels"] == artifact.manifest["kernels"]
    sess = braze.InferenceSession(saved)
    x = {sess.get_inputs()[0].name: np.zeros(sess.get_inputs()[0].shape, np.float32)}
    np.testing.assert_allclose(sess.run(None, x)[0], artifact.run(x)[sess.get_outputs()[0].name])
    with pytest.raises(InputError, match="no output named 'nope'"):
        sess.run(["nope"], x)
