"""The Ascend-like estimate counts launches: every kernel pays the
descriptor's ``npu.launch_us`` on top of its roofline time, so fusing into
fewer kernels shows what it saves. Fusion and the estimate only: no builds."""

import json

import pytest

from braze.cli import main
from braze.compiler import fuse_only
from braze.errors import TargetError
from braze.targets import get_target
from models import tiny

BERT = str(tiny("bert-tiny"))


def estimate(level: int, target="ascend910b-like") -> dict:
    return fuse_only(BERT, level, target=target)[1].estimate


def with_launch(tmp_path, launch_us) -> str:
    data = get_target("ascend910b-like").descriptor()
    data["npu"]["launch_us"] = launch_us
    path = tmp_path / "npu.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("name", ["ascend910b-like", "ascend310p-like"])
def test_built_in_descriptors_have_a_launch_cost(name):
    assert get_target(name).npu.launch_us == 10.0


def test_every_kernel_pays_one_launch():
    est = estimate(2)
    launch = get_target("ascend910b-like").npu.launch_us
    kernels = est["kernels"]
    for k in kernels:
        assert k["launch_us"] == launch
        assert k["estimate_us"] == pytest.approx(k["roofline_us"] + launch, abs=1e-3)
        assert k["roofline_us"] == pytest.approx(max(k["cube_us"] + k["vector_us"], k["memory_us"]), abs=1e-3)
    assert est["launch_us"] == pytest.approx(len(kernels) * launch)
    assert est["total_us"] == pytest.approx(est["roofline_us"] + len(kernels) * launch, abs=1e-2)


def test_fewer_kernels_fewer_launches():
    unfused, fused = estimate(0), estimate(2)
    assert len(fused["kernels"]) < len(unfused["kernels"])
    assert fused["total_us"] < unfused["total_us"]
    saved = (len(unfused["kernels"]) - len(fused["kernels"])) * 10.0
    assert unfused["launch_us"] - fused["launch_us"] == pytest.approx(saved)
    # on a model this small the launches are most of what fusion saves
    assert saved > unfused["roofline_us"] - fused["roofline_us"]


def test_overriding_launch_us_moves_the_total_by_kernels_times_the_difference(tmp_path, capsys):
    base = estimate(2)
    n = len(base["kernels"])
    cheap = estimate(2, with_launch(tmp_path, 2.5))
    assert len(cheap["kernels"]) == n
    assert cheap["roofline_us"] == pytest.approx(base["roofline_us"])
    assert base["total_us"] - cheap["total_us"] == pytest.approx(n * (10.0 - 2.5), abs=1e-2)
    # 0 leaves launches out: the pure roofline
    none = estimate(2, with_launch(tmp_path, 0))
    assert none["launch_us"] == 0 and none["total_us"] == pytest.approx(base["roofline_us"], abs=1e-2)
    # the same through the command line
    assert main(["explain", BERT, "--target", with_launch(tmp_path, 2.5), "--json", "-q"]) == 0
    shown = json.loads(capsys.readouterr().out)["estimate"]
    assert shown["total_us"] == pytest.approx(cheap["total_us"])


def test_a_descriptor_without_launch_us_gets_the_default(tmp_path):
    data = get_target("ascend310p-like").descriptor()
    del data["npu"]["launch_us"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    assert get_target(str(path)).npu.launch_us == 10.0


@pytest.mark.parametrize("bad", [-1, "fast", True])
def test_a_bad_launch_us_is_a_typed_error(tmp_path, bad):
    with pytest.raises(TargetError, match=r"'npu.launch_us' must be a non-negative number \(us\)"):
        get_target(with_launch(tmp_path, bad))
