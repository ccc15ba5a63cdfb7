"""The coordination service in its own small process, so process 0's death is a named error.

``jax.distributed.initialize`` runs the coordination service inside process 0.
When process 0 is killed, every other process's JAX client notices the service
is gone within milliseconds and aborts (SIGABRT) before anything else can act.
``tps.initialize`` therefore starts the service in a helper process (this file,
run by path: it imports only the standard library, ``jaxlib`` and
``jax_shims/runtime_service.py`` by path) and hands JAX
a stand-in whose ``shutdown()`` tells the helper to stop. When process 0 dies,
the helper keeps serving while the other processes still hold connections (at
most ``linger`` seconds), so their health monitors, which see process 0's link
close at once, end them with ``UnavailableError`` naming process 0.

The helper ignores SIGINT (a Ctrl-C reaches the processes themselves), exits
when the launcher that started the job is gone, and binds exactly the address
it is given.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

LINGER_S = 10.0
_READY = "ready"


class HostedService:
    """JAX's ``DistributedRuntimeService`` stand-in: ``shutdown()`` stops the helper."""

    def __init__(self, proc: subprocess.Popen[str]):
        self.proc = proc

    def shutdown(self) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write("done\n")
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass


def start(bind_address: str, num_processes: int, *, linger: float = LINGER_S,
          **service_kwargs: Any) -> HostedService:
    """Starts the helper and waits until its service listens on ``bind_address``.

    Args:
      bind_address: ``host:port`` the service listens on.
      num_processes: how many processes will join.
      linger: seconds the helper keeps serving after process 0 is gone.
      **service_kwargs: every keyword argument JAX's join gave the factory
        (``heartbeat_timeout``, ``shutdown_timeout``, and whatever a newer jaxlib
        adds, e.g. the mTLS files); the helper passes each one that is not None
        on to jaxlib's own factory unchanged.

    Raises:
      RuntimeError: the service could not listen there (port in use, or an
        address of another machine).
    """
    # -P: this file's folder (our modules) must not shadow anything jaxlib imports.
    safe = ["-P"] if sys.version_info >= (3, 11) else []
    passed = {k: v for k, v in service_kwargs.items() if v is not None}
    command = [sys.executable, "-u", *safe, os.path.abspath(__file__), bind_address,
               str(num_processes), json.dumps(passed), str(linger),
               os.environ.get("TPS_LAUNCHER_PID", "0")]
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env, close_fds=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != _READY:
        proc.wait()
        reason = line.partition(" ")[2] or f"the helper exited with code {proc.returncode}"
        if reason.startswith("TypeError"):
            from tpustrategy._src.jax_shims import supported

            raise RuntimeError(
                f"tps.initialize: this jaxlib's coordination-service factory refused the "
                f"arguments JAX's join gave it ({', '.join(sorted(passed)) or 'none'}): {reason}.\n"
                + supported.FIX)
        raise RuntimeError(
            f"tps.initialize: the coordination service could not listen on {bind_address} "
            f"({reason}).\nAnother program may use that port, or the host is not an address of "
            "this machine (for example a NAT or Kubernetes Service address).\nFix: choose a "
            "free port; or pass coordinator_bind_address='0.0.0.0:PORT' to listen on every "
            "interface (only on a private network: the service has no authentication)."
        )
    proc.stdout.close()
    return HostedService(proc)


@contextlib.contextmanager
def hosted(enabled: bool, *, linger: float = LINGER_S) -> Iterator[None]:
    """While active, JAX's process 0 starts its coordination service through ``start``."""
    if not enabled:
        yield
        return
    from tpustrategy._src.jax_shims import runtime_service

    def make(original: Any) -> Any:
        def get_service(address: str, num_nodes: int, **kwargs: Any) -> Any:
            # Recoverable jobs let processes leave and rejoin: JAX's own in-process service
            # (the helper's linger-and-stop rule is written for a job that ends together).
            if kwargs.get("recoverable"):
                return original(address, num_nodes, **kwargs)
            return start(address, num_nodes, linger=linger, **kwargs)

        return get_service

    with runtime_service.replaced(make):
        yield


# -- the helper process --------------------------------------------------------------------


def _connections(port: int) -> int:
    """Established TCP connections to ``port`` on this host (-1 if unknown)."""
    count, known = 0, False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        known = True
        for row in rows:
            fields = row.split()
            if len(fields) > 3 and fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                count += 1
    return count if known else -1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _load_shim() -> Any:
    """``jax_shims.runtime_service`` loaded by path (this helper imports no tpustrategy package)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jax_shims",
                        "runtime_service.py")
    spec = importlib.util.spec_from_file_location("_tps_runtime_service", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _serve(argv: list[str]) -> int:
    bind, num, passed, linger, launcher = argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    port = int(bind.rsplit(":", 1)[1])
    try:
        service = _load_shim().start(bind, int(num), **json.loads(passed))
    except Exception as err:  # noqa: BLE001 - reported to process 0, which raises
        print(f"error {type(err).__name__}: {err}", flush=True)
        return 1
    print(_READY, flush=True)
    parent = os.getppid()
    done, eof = threading.Event(), threading.Event()

    def read_parent() -> None:
        line = sys.stdin.readline()
        (done if line.strip() == "done" else eof).set()

    threading.Thread(target=read_parent, daemon=True).start()
    reader_gone_at: float | None = None
    while True:
        time.sleep(0.1)
        if launcher != "0" and not _alive(int(launcher)):
            break
        parent_gone = eof.is_set() or os.getppid() != parent
        if not (done.is_set() or parent_gone):
            continue
        if reader_gone_at is None:
            # Let go of process 0's output at once: whoever reads it until its end must not
            # wait for this helper (and the service's complaints would only trail its error).
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            reader_gone_at = time.monotonic()
        waited = time.monotonic() - reader_gone_at
        # After process 0 ends (normally or not), serve the others until they let go.
        if _connections(port) == 0 or waited > (2.0 if done.is_set() else float(linger)):
            break
    service.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1:]))
