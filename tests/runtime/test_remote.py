"""Tuning and running on other machines through TVM's RPC tracker (braze
tune/run/bench --rpc): a tracker and two RPC servers on 127.0.0.1, each
started here, bounded in time and killed at the end.

- a tune measures on both servers, survives one of them being killed, and
  ``braze compile --tuning-db`` uses its records;
- a tune killed mid-way keeps its records, and ``--resume`` measures only
  the workloads without them;
- ``--merge`` keeps the fastest record per workload;
- ``bench --rpc`` on a local server agrees with the local ``bench`` (15%);
- no tracker, a port that never answers, and a key without servers are
  RemoteErrors within seconds.
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("tornado")  # TVM's tracker needs it

from braze.codegen.remote import Tracker, require_servers
from braze.errors import RemoteError
from models import mlp

ROOT = Path(__file__).resolve().parents[2]
KEY = "braze-test"
#: Bounds on the processes this file starts (seconds).
START_S, TUNE_S = 60, 300


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict:
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "TVM_NUM_THREADS": "1"}


def spawn(args, log: Path) -> subprocess.Popen:
    """A process in a session of its own (so that killing its group ends its children too)."""
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, *args], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                env=env(), start_new_session=True, stdin=subprocess.DEVNULL)


def kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


class Cluster:
    """A tracker and ``n`` servers under ``KEY``; ``measured(i)``: how many
    modules server ``i`` has loaded (one per measured candidate or run)."""

    def __init__(self, root: Path, n: int = 2):
        self.root, self.procs, self.logs = root, [], []
        self.port = free_port()
        self.tracker = Tracker("127.0.0.1", self.port, KEY)
        self.procs.append(spawn(["-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(self.port),
                                 "--port-end", str(self.port + 1)], root / "tracker.log"))
        self._wait(lambda: _listening(self.port), "the tracker")
        self.servers = []
        for i in range(n):
            port, log = free_port(), root / f"server{i}.log"
            self.servers.append(spawn(["-m", "tvm.exec.rpc_server", "--tracker", f"127.0.0.1:{self.port}",
                                       "--key", KEY, "--host", "127.0.0.1", "--port", str(port),
                                       "--port-end", str(port + 1)], log))
            self.logs.append(log)
        self.procs += self.servers
        self._wait(lambda: _count(self.tracker) == n, f"{n} servers")

    def measured(self, i: int) -> int:
        return self.logs[i].read_text(errors="replace").count("load_module")

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_S
        while not ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not start within {START_S} s")
            time.sleep(0.2)

    def close(self) -> None:
        for proc in reversed(self.procs):
            kill(proc)


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def _count(tracker) -> int:
    try:
        return require_servers(tracker).total
    except RemoteError:
        return 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """Two matmul workloads (level 0: the bias and ReLU kernels are left to the rules)."""
    import onnx
    from onnx import compose

    root = tmp_path_factory.mktemp("model")
    a = onnx.load(mlp(root / "a.onnx", m=16, k=32, n=32))
    b = onnx.load(mlp(root / "b.onnx", m=16, k=32, n=48, seed=1))
    b = compose.add_prefix(b, "b_")
    merged = compose.merge_models(a, b, io_map=[("y0", "b_x")])
    path = root / "two.onnx"
    onnx.save(merged, path)
    return str(path)


def tune_cmd(model, db, cluster, *extra):
    return ["-m", "braze.cli", "tune", model, "--level", "0", "--db", str(db), "--rpc", str(cluster.tracker),
            "--key", KEY, "--threads", "1", "--json", *extra]


def records(db) -> int:
    path = Path(db) / "database_tuning_record.json"
    return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0


def finish(proc, log: Path, timeout=TUNE_S):
    try:
        rc = proc.wait(timeout)
    finally:
        kill(proc)
    return rc, log.read_text(errors="replace")


# --- faults: typed errors, in bounded time ------------------------------------------------------------
def test_no_tracker_is_a_remote_error_within_seconds(tmp_path):
    started = time.monotonic()
    with pytest.raises(RemoteError, match=r"cannot reach the RPC tracker at 127\.0\.0\.1:\d+ \(Connection refused\)"):
        require_servers(Tracker("127.0.0.1", free_port(), KEY))
    # a port that accepts and never answers: TVM's client would wait forever
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        with pytest.raises(RemoteError, match="no answer to a connection within 5 s"):
            require_servers(Tracker("127.0.0.1", silent.getsockname()[1], KEY))
    assert time.monotonic() - started < 30


def test_the_cli_names_the_tracker_it_cannot_reach(tmp_path, capsys):
    from braze.cli import main

    port = free_port()
    started = time.monotonic()
    assert main(["tune", mlp(tmp_path / "m.onnx"), "--db", str(tmp_path / "db"), "--rpc", f"127.0.0.1:{port}",
                 "--key", KEY, "-q"]) == 1
    err = capsys.readouterr().err
    assert f"error: cannot reach the RPC tracker at 127.0.0.1:{port}" in err and "Traceback" not in err
    assert time.monotonic() - started < 30


def test_a_key_without_servers_names_the_keys_the_tracker_has(cluster):
    started = time.monotonic()
    with pytest.raises(RemoteError) as e:
        require_servers(Tracker("127.0.0.1", cluster.port, "nosuch"))
    assert "no server for key 'nosuch'" in str(e.value) and f"{KEY} (2 servers)" in str(e.value)
    assert time.monotonic() - started < 30


# --- running and timing an artifact on a server --------------------------------------------------------
def test_run_and_bench_over_rpc_agree_with_local(cluster, tmp_path, capsys):
    """Same outputs; the server's median within 15% of the local bench's
    (one thread each, up to three tries on a noisy machine)."""
    import numpy as np

    from braze.cli import main
    from braze.measure import random_inputs
    from braze.runtime import load

    onnx_path = str(ROOT / "braze" / "data" / "mobilenetv2-tiny.onnx")
    art = str(tmp_path / "m.braze")
    assert main(["compile", onnx_path, "-o", art, "--threads", "1", "-q"]) == 0
    inputs = tmp_path / "in.npz"
    np.savez(inputs, **random_inputs(load(art).inputs))
    for where in ([], ["--rpc", str(cluster.tracker), "--key", KEY]):
        assert main(["run", art, "--inputs", str(inputs), "-o", str(tmp_path / f"out{len(where)}.npz"), *where]) == 0
    local, remote = np.load(tmp_path / "out0.npz"), np.load(tmp_path / "out4.npz")
    np.testing.assert_allclose(remote["logits"], local["logits"], rtol=1e-6, atol=1e-7)
    capsys.readouterr()

    def local() -> float:
        assert main(["bench", art, "--onnx", onnx_path, "--inputs", str(inputs), "--threads", "1", "--repeat", "40",
                     "--phases", "4", "--processes", "1", "--json"]) == 0
        return json.loads(capsys.readouterr().out)["braze_ms"]

    def over_rpc() -> float:
        assert main(["bench", art, "--inputs", str(inputs), "--threads", "1", "--repeat", "40", "--json",
                     "--rpc", str(cluster.tracker), "--key", KEY]) == 0
        there = json.loads(capsys.readouterr().out)
        assert there["onnxruntime_ms"] is None and "not available on the remote server" in there["onnxruntime"]
        return there["braze_ms"]

    ratios = []  # each round: the server's median against the mean of local runs before and after it
    for _ in range(4):
        before, there, after = local(), over_rpc(), local()
        ratios.append(2 * there / (before + after))
        if abs(ratios[-1] - 1) <= 0.15:
            break
    print(f"bench --rpc / local bench: {', '.join(f'{r:.3f}' for r in ratios)}")
    assert abs(ratios[-1] - 1) <= 0.15, ratios


# --- tuning ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def resumed(cluster, model, tmp_path_factory):
    """A tune killed (SIGKILL, as a lost machine or session would end it)
    once its second workload has started (the first one's batch recorded),
    then resumed. (Ctrl-C ends a tune cleanly between batches; in the
    middle of TVM's search it is not always clean: a kill is the test
    that holds.)"""
    root = tmp_path_factory.mktemp("resume")
    db, log = root / "db", root / "first.log"
    first = spawn(tune_cmd(model, db, cluster, "--trials", "2"), log)
    try:
        deadline = time.monotonic() + TUNE_S
        while "kernel 2/2" not in log.read_text(errors="replace") and first.poll() is None:
            assert time.monotonic() < deadline, "the tune did not reach its second workload"
            time.sleep(0.05)
        kill(first)
        rc, out = finish(first, log, 60)
    finally:
        kill(first)
    kept = records(db)
    measured = cluster.measured(0) + cluster.measured(1)
    log2 = root / "second.log"
    rc2, out2 = finish(spawn(tune_cmd(model, db, cluster, "--trials", "2", "--resume"), log2), log2)
    return {"rc": rc, "out": out, "kept": kept, "rc2": rc2, "out2": out2, "db": db,
            "new_measurements": cluster.measured(0) + cluster.measured(1) - measured}


def test_an_interrupted_tune_keeps_its_records_and_resume_continues(resumed):
    print(f"records kept after the interrupt: {resumed['kept']}; after --resume: {records(resumed['db'])}")
    assert resumed["rc"] == -signal.SIGKILL and "kernel 2/2" in resumed["out"]
    assert resumed["kept"] >= 1
    assert resumed["rc2"] == 0, resumed["out2"][-2000:]
    report = json.loads(resumed["out2"][resumed["out2"].index("{"):])
    assert report["records_before"] == resumed["kept"]
    done = [t for t in report["tasks"] if t["skipped"]]
    assert len(done) >= 1 and all(t["skipped"].startswith("already tuned") for t in done)
    assert (f"{len(done)} workloads already have 2 records, skipped; {2 - len(done)} to tune "
            f"({resumed['kept']} records of these workloads kept)") in resumed["out2"]
    # each new record measured once; none of the recorded workloads measured again
    assert records(resumed["db"]) - resumed["kept"] == resumed["new_measurements"] <= 2 * 2 - resumed["kept"]


def test_merge_keeps_the_fastest_record_of_each_workload(resumed, tmp_path, capsys):
    from braze.cli import main

    db, faster = resumed["db"], tmp_path / "faster"
    shutil.copytree(db, faster, ignore=shutil.ignore_patterns("logs"))
    lines = (faster / "database_tuning_record.json").read_text().splitlines()
    first = json.loads(lines[0])  # [workload index, [trace, run_secs, target, args_info]]
    first[1][1] = [1e-9]
    (faster / "database_tuning_record.json").write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    out = tmp_path / "merged"
    assert main(["tune", "--merge", str(db), str(faster), "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["workloads"] == 2 and report["records"] == 2  # one machine: one record per workload
    merged = [json.loads(line) for line in (out / "database_tuning_record.json").read_text().splitlines()]
    assert min(r[1][1] for r in merged) == [1e-9]


def test_tune_on_two_servers_survives_one_dying(cluster, model, tmp_path):
    """Both servers measure (candidates built here in two processes); one
    is killed mid-tune; the tune completes on the other, and a compile
    uses its records."""
    from braze.compiler import compile as braze_compile

    before = [cluster.measured(0), cluster.measured(1)]
    db, log = tmp_path / "db", tmp_path / "tune.log"
    tune = spawn(tune_cmd(model, db, cluster, "--trials", "8", "--builders", "2"), log)
    try:
        deadline = time.monotonic() + TUNE_S
        while not all(cluster.measured(i) > before[i] for i in (0, 1)) and tune.poll() is None:
            assert time.monotonic() < deadline, "the tune did not reach both servers"
            time.sleep(0.05)
        kill(cluster.servers[1])  # mid-tune: its candidates in flight fail, the others go to server 0
        at_kill = cluster.measured(0)
        rc, out = finish(tune, log)
    finally:
        kill(tune)
    assert rc == 0, out[-2000:]
    assert cluster.measured(0) > at_kill  # the tune went on on the server left
    report = json.loads(out[out.index("{"):])
    assert report["remote"]["servers"] == 2 and all(t["trials"] >= 1 and t["best_ms"] for t in report["tasks"])
    artifact = braze_compile(model, level=0, tuning_db=str(db), cache_dir=str(tmp_path / "cache"))
    tuned = [k for k in artifact.kernels if k["schedule"] == "tuned"]
    assert len(tuned) == 2  # both matmuls


def test_a_candidate_lost_in_the_rpc_layer_is_measured_once_more():
    """A server dying mid-measurement fails its candidate with an RPCRunner
    error: measured again (on the next server the tracker hands out),
    once; a candidate that failed otherwise is not."""
    from tvm.s_tir.meta_schedule.runner import RunnerInput, RunnerResult

    from braze.codegen.remote import retrying

    class Done:
        def __init__(self, result):
            self.value = result

        def done(self):
            return True

        def result(self):
            return self.value

    class Runner:
        def __init__(self):
            self.calls = []

        def run(self, inputs):
            self.calls.append([str(i.artifact_path) for i in inputs])
            lost = RunnerResult(None, "RPCRunner: An exception occurred\nConnection reset by peer")
            if len(self.calls) == 1:
                return [Done(lost), Done(RunnerResult(None, "a kernel error")), Done(RunnerResult([1e-3], None))]
            return [Done(lost if len(self.calls) > 2 else RunnerResult([2e-3], None))]

    inner = Runner()
    futures = retrying(inner).run([RunnerInput(name, "llvm", []) for name in "abc"])
    results = [f.result() for f in futures]
    assert [list(map(float, r.run_secs)) if r.run_secs else r.error_msg for r in results] == \
        [[2e-3], "a kernel error", [1e-3]]
    assert inner.calls == [["a", "b", "c"], ["a"]]


def test_an_artifact_with_amx_kernels_is_refused_by_rpc_servers():
    """A TVM RPC server never asks Linux for AMX's tile state, so an artifact
    whose matmuls run on AMX tiles gets a RemoteError, not an illegal
    instruction in the server; the same CPU without amx kernels is fine."""
    from types import SimpleNamespace

    from braze.runtime.remote import _check_cpu

    tracker = SimpleNamespace(key="cpu")
    requires = {"arch": "x86_64", "features": ["avx2", "avx512f", "amx-tile", "amx-bf16"]}
    found = ("sapphirerapids", "x86_64-linux-gnu")
    _check_cpu({"requires": requires, "kernels": [{"schedule": "gemm"}]}, found, tracker)
    with pytest.raises(RemoteError, match="AMX tiles"):
        _check_cpu({"requires": requires, "kernels": [{"schedule": "amx"}]}, found, tracker)
