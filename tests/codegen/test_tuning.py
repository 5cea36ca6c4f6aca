"""Tuning with meta_schedule (braze tune) and compiling with the records
(--tuning-db): a tuned kernel is marked and matches onnxruntime; kernels the
database has no record for keep the rules; a bad database is a TuningError."""

import json
import os

import numpy as np
import pytest

from braze.cli import main
from braze.compiler import compile as braze_compile
from braze.errors import TuningError
from braze.measure import compare, run_onnxruntime
from models import mlp


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A one-kernel model (level 1: matmul + bias + ReLU) tuned with 4 trials."""
    from braze.tools.tune import tune

    root = tmp_path_factory.mktemp("tuning")
    model, db = mlp(root / "mlp.onnx"), str(root / "db")
    seen = []
    report = tune(model, db, level=1, trials=4, threads=1, seed=0, progress=seen.append)
    return model, db, report, seen


def test_tune_writes_records_and_reports_progress(tuned):
    _, db, report, seen = tuned
    assert sorted(os.listdir(db)) == ["database_tuning_record.json", "database_workload.json", "logs"]
    [task] = report.results  # matmul, bias and ReLU: one kernel at level 1
    [name] = task.kernels
    assert 1 <= task.trials <= 4 and task.best_ms > 0
    assert task.flops == pytest.approx(2 * 32 * 64 * 64, rel=0.1)
    assert seen[0].trials == 0 and seen[-1].done == seen[-1].trials > 0 and seen[-1].left_s is not None
    assert f"kernel 1/1 {name}: {seen[-1].trials}/4 trials" in seen[-1].line()


def test_compile_uses_the_tuned_schedule(tuned, tmp_path):
    model, db, _, _ = tuned
    artifact = braze_compile(model, level=1, tuning_db=db, cache_dir=str(tmp_path))
    [kernel] = artifact.kernels
    assert kernel["schedule"] == "tuned" and kernel["schedule_params"]["run_ms"] > 0
    assert artifact.manifest["tuning_db"]["path"] == os.path.abspath(db)
    x = {"x": np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32)}
    [error] = compare(artifact.run(x), run_onnxruntime(model, x))
    assert error.max_rel <= 1e-5
    # the database is part of the compile cache key: without it, the same model gets the rules
    untuned = braze_compile(model, level=1, cache_dir=str(tmp_path))
    assert untuned.kernels[0]["schedule"] != "tuned"


def test_kernels_without_a_record_keep_the_rules(tuned, tmp_path):
    _, db, _, _ = tuned
    other = mlp(tmp_path / "wide.onnx", m=8)  # another shape: another workload
    assert braze_compile(other, level=1, tuning_db=db).kernels[0]["schedule"] not in ("tuned", "", "none")


def test_a_second_run_resumes(tuned, capsys):
    model, db, _, _ = tuned
    assert main(["tune", model, "--level", "1", "--trials", "1", "--db", db, "--threads", "1", "-q", "--json"]) == 0
    [task] = json.loads(capsys.readouterr().out)["tasks"]
    assert task["skipped"].startswith("already tuned") and task["best_ms"] > 0


def test_workloads_are_shared_and_elementwise_kernels_skipped(tmp_path):
    from braze.codegen.kernel import partition
    from braze.codegen.tuning import find_tasks
    from braze.compiler import fuse_only

    module, _ = fuse_only(mlp(tmp_path / "deep.onnx", k=64, n=64, layers=2), level=0)
    tasks, skipped = find_tasks(partition(module.main))
    [task] = tasks  # both layers' MatMuls: one workload
    assert task.kernels == ["k0_mm0", "k3_mm1"]
    assert [name for name, _ in skipped] == ["k1_bias0", "k2_relu0", "k4_bias1", "k5_relu1"]
    assert "--all" in skipped[0][1]
    tasks, _ = find_tasks(partition(module.main), names=["relu1"])  # an ONNX node name
    assert [t.kernels for t in tasks] == [["k5_relu1"]]
    with pytest.raises(TuningError, match="no kernel named nosuch"):
        find_tasks(partition(module.main), names=["nosuch"])


def test_missing_or_corrupt_database_is_a_tuning_error(tmp_path, capsys):
    model = mlp(tmp_path / "m.onnx")
    with pytest.raises(TuningError, match="no tuning database"):
        braze_compile(model, level=1, tuning_db=str(tmp_path / "nosuch"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TuningError, match="missing database_workload.json"):
        braze_compile(model, level=1, tuning_db=str(empty))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "database_workload.json").write_text("not json{\n")
    (bad / "database_tuning_record.json").write_text("")
    out = str(tmp_path / "m.braze")
    assert main(["compile", model, "--level", "1", "--tuning-db", str(bad), "-o", out, "-q"]) == 1
    assert "corrupt tuning database" in capsys.readouterr().err and not os.path.exists(out)
