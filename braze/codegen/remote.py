"""Other machines, through TVM's RPC tracker: finding servers, asking them
what CPU they are, and meta_schedule's ``RPCRunner`` measuring on them.

braze schedules nothing itself here. A tracker (``python -m
tvm.exec.rpc_tracker``) hands each request for a device *key* to a free
RPC server registered under that key (``python -m tvm.exec.rpc_server
--tracker HOST:PORT --key KEY``); meta_schedule's RPC runner asks it for a
server per candidate, uploads the candidate's library, times it there and
returns the times. What braze adds is bounds: TVM's client retries a
refused connection for 60 s and waits for a free server forever, so every
call here checks the tracker first, with a socket timeout, and raises a
``RemoteError`` that names the tracker, the key and what the tracker has.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass

from ..errors import RemoteError, last_line

#: Seconds to open a TCP connection to the tracker, and for one exchange with it.
CONNECT_TIMEOUT_S = 5.0
#: Seconds one candidate may hold a server (upload, run, time): meta_schedule's
#: session timeout. A server that dies mid-measurement fails its candidate after this.
SESSION_TIMEOUT_S = 60
#: Seconds a candidate waits for a free server before it counts as failed (all
#: servers busy is normal; all of them gone must not hang the tune).
QUEUE_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Tracker:
    """A tracker's address and the device key to ask it for."""

    host: str
    port: int
    key: str

    @staticmethod
    def parse(address: str, key: str) -> Tracker:
        """``HOST:PORT`` and a key (``--rpc`` and ``--key``)."""
        host, _, port = (address or "").rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise RemoteError(f"--rpc {address}: expected HOST:PORT of an RPC tracker, e.g. 127.0.0.1:9190")
        if not key:
            raise RemoteError(f"--rpc {address} needs --key KEY: the device key its servers registered with")
        return Tracker(host, int(port), key)

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    def query_command(self) -> str:
        return f"python -m tvm.exec.query_rpc_tracker --host {self.host} --port {self.port}"


@dataclass(frozen=True)
class Servers:
    """What the tracker says about ``key``: its servers' addresses, how many
    are free now, and every key it has servers for (with their counts)."""

    key: str
    addresses: list[str]
    free: int
    keys: dict[str, int]

    @property
    def total(self) -> int:
        return len(self.addresses)


# --- bounded calls --------------------------------------------------------------------------------
def _bounded(call, seconds: float, what: str, tracker: Tracker):
    """``call()`` in a daemon thread, at most ``seconds``: TVM's RPC calls
    block on sockets without a timeout of their own."""
    box: dict = {}

    def run():
        try:
            box["value"] = call()
        except BaseException as e:  # noqa: BLE001 -- carried to the caller's thread
            box["error"] = e

    worker = threading.Thread(target=run, daemon=True, name=f"braze-rpc-{what}")
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise RemoteError(f"tracker {tracker}: no answer to {what} within {seconds:.0f} s; check it with "
                          f"`{tracker.query_command()}`")
    if "error" in box:
        raise box["error"]
    return box["value"]


def check_reachable(tracker: Tracker, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """A TCP connection to the tracker opens within ``timeout`` seconds, or RemoteError."""
    try:
        with socket.create_connection((tracker.host, tracker.port), timeout=timeout):
            pass
    except OSError as e:
        reason = "timed out" if isinstance(e, socket.timeout) else (e.strerror or str(e))
        raise RemoteError(f"cannot reach the RPC tracker at {tracker} ({reason}); start one with "
                          f"`python -m tvm.exec.rpc_tracker --host 0.0.0.0 --port {tracker.port}` "
                          "on that machine, or check --rpc and the firewall") from None


def _connect_tracker(tracker: Tracker):
    from tvm import rpc

    check_reachable(tracker)

    def connect():
        try:
            return rpc.connect_tracker(tracker.host, tracker.port)
        except Exception as e:  # noqa: BLE001 -- something else listens on that port
            raise RemoteError(f"{tracker} is not an RPC tracker ({last_line(e)})") from None

    return _bounded(connect, CONNECT_TIMEOUT_S, "a connection", tracker)


def servers(tracker: Tracker) -> Servers:
    """The tracker's servers for ``tracker.key`` (bounded; RemoteError if it cannot be reached)."""
    session = _connect_tracker(tracker)
    try:
        summary = _bounded(session.summary, CONNECT_TIMEOUT_S, "a summary request", tracker)
    finally:
        session.close()
    keys: dict[str, int] = {}
    addresses = []
    for item in summary.get("server_info", []):
        key = item["key"].split(":", 1)[-1]  # "server:KEY"
        keys[key] = keys.get(key, 0) + 1
        if key == tracker.key:
            addresses.append(":".join(map(str, item["addr"])))
    free = summary.get("queue_info", {}).get(tracker.key, {}).get("free", 0)
    return Servers(tracker.key, addresses, free, keys)


def require_servers(tracker: Tracker) -> Servers:
    """``servers(tracker)``, or RemoteError naming the key and the keys the tracker has."""
    found = servers(tracker)
    if not found.total:
        has = ", ".join(f"{k} ({n} server{'s' * (n != 1)})" for k, n in sorted(found.keys.items())) or "no servers"
        raise RemoteError(f"tracker {tracker} has no server for key '{tracker.key}' (it has: {has}); start one "
                          f"with `python -m tvm.exec.rpc_server --tracker {tracker} --key {tracker.key}` "
                          "or give one of its keys to --key")
    return found


def connect(tracker: Tracker, session_timeout: float = 0, wait: float = QUEUE_TIMEOUT_S):
    """An RPC session on a free server of the key: RemoteError if there is
    none, or none comes free within ``wait`` seconds."""
    require_servers(tracker)
    session = _connect_tracker(tracker)

    def request():
        return session.request(tracker.key, priority=1, session_timeout=session_timeout, max_retry=2)

    try:
        return _bounded(request, wait, f"a request for a '{tracker.key}' server", tracker)
    except RemoteError:
        raise
    except Exception as e:  # noqa: BLE001 -- the server went away between the summary and the request
        raise RemoteError(f"tracker {tracker}: a '{tracker.key}' server could not be reached "
                          f"({last_line(e)}); check it with `{tracker.query_command()}`") from None
    finally:
        session.close()


# --- what the server is ----------------------------------------------------------------------------
def remote_cpu(session) -> tuple[str, str] | None:
    """(LLVM's CPU name, triple) of the server's machine, from the LLVM
    functions a full TVM server registers; None on a runtime-only server."""
    try:
        return (str(session.get_function("target.llvm_get_system_cpu")()),
                str(session.get_function("target.llvm_get_system_triple")()))
    except Exception:  # noqa: BLE001 -- "Module has no function": a server without LLVM
        return None


def server_target(tracker: Tracker, threads: int | None = None):
    """(the Target a server of the key runs, a sentence on where it came
    from). The server's CPU comes from its LLVM (``remote_cpu``); on the
    host's own CPU the host's descriptor, else a ``cpu`` descriptor for
    that CPU (its vector width and FMA units from LLVM's name; its caches,
    and its cores unless ``threads`` is given, this machine's: RPC does not
    report them). A server that cannot say gets the host's CPU, and the
    sentence says so."""
    from ..targets import detect, get_target

    session = connect(tracker)
    found = remote_cpu(session)
    if found is None:
        return get_target("cpu", threads), (f"the '{tracker.key}' server does not report its CPU (a TVM runtime "
                                             "without LLVM): tuning for this machine's CPU; give --target")
    mcpu, triple = found
    if mcpu == detect.llvm_cpu() and detect.arch(triple) == detect.arch():
        return get_target("cpu", threads), f"the '{tracker.key}' server's CPU, {mcpu}: this machine's"
    bits = detect.vector_bits(set(), mcpu)
    descriptor = {"name": f"cpu-{mcpu}", "family": "cpu",
                  "description": f"The CPU of the '{tracker.key}' RPC servers ({mcpu}, {triple}), as they report it.",
                  "cpu": {"mcpu": mcpu, "mtriple": triple, "num_cores": threads or "detect", "vector_bits": bits,
                          "vector_registers": 32 if bits == 512 or detect.arch(triple) == "aarch64" else 16,
                          "fma_units": detect.fma_units(mcpu, bits), "l1d_bytes": "detect", "l2_bytes": "detect",
                          "l3_bytes": "detect"}}
    cores = f"{threads} threads" if threads else "this machine's core count (give --threads)"
    return get_target(descriptor, threads), (f"the '{tracker.key}' server's CPU, {mcpu} ({triple}); caches and "
                                             f"{cores} assumed")


# --- meta_schedule's runner ------------------------------------------------------------------------
def rpc_runner(tracker: Tracker, workers: int):
    """meta_schedule's ``RPCRunner`` on the key's servers, ``workers``
    candidates in flight at once (one per server). Each candidate asks the
    tracker for a server through ``create_session`` (bounded); a server
    that dies mid-measurement fails its candidate, recorded as failed."""
    from tvm.s_tir import meta_schedule as ms

    config = ms.runner.RPCConfig(tracker_host=tracker.host, tracker_port=tracker.port, tracker_key=tracker.key,
                                 session_timeout_sec=SESSION_TIMEOUT_S)
    return retrying(ms.runner.RPCRunner(config, max_workers=max(1, workers), f_create_session=create_session))


#: How many times a candidate whose measurement failed in the RPC layer (its
#: server died, the session timed out) is measured again, on whichever server
#: the tracker hands out next; then it is recorded as failed.
RETRIES = 1


def retrying(inner, retries: int = RETRIES):
    """A meta_schedule runner that runs through ``inner`` and sends a
    candidate that failed in the RPC layer (an error from ``RPCRunner``
    itself, not from building it) back once more."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.runner import PyRunner, PyRunnerFuture

    @derived_object
    class RetryFuture(PyRunnerFuture):
        def __init__(self, runner_input, future):
            super().__init__()
            self.runner_input, self.future, self.left = runner_input, future, retries

        def done(self) -> bool:
            return self.future.done()

        def result(self):
            result = self.future.result()
            while self.left and _lost(result.error_msg):
                self.left -= 1
                self.future = inner.run([self.runner_input])[0]
                result = self.future.result()
            return result

    @derived_object
    class RetryingRunner(PyRunner):
        def run(self, runner_inputs):
            return [RetryFuture(i, f) for i, f in zip(runner_inputs, inner.run(runner_inputs))]

    return RetryingRunner()


def _lost(error: str | None) -> bool:
    """Whether a runner error came from the RPC layer (worth another server)."""
    return bool(error) and str(error).startswith("RPCRunner:")


def create_session(rpc_config):
    """meta_schedule's ``f_create_session``, run in the runner's worker
    process: a session on a free server, failing (the candidate, not the
    tune) when the key has no server left rather than waiting forever."""
    tracker = Tracker(rpc_config.tracker_host, int(rpc_config.tracker_port), rpc_config.tracker_key)
    return connect(tracker, session_timeout=rpc_config.session_timeout_sec)
