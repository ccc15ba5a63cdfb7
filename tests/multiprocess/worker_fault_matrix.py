"""Worker of test_fault_matrix.py: one process of a job suffers a fault, the others wait in it.

Usage: ``worker_fault_matrix.py FAULT VICTIM DIR HEARTBEAT [WHERE]``, under the
launcher or with ``TF_CONFIG`` / ``TPS_*`` set by the test.

- FAULT: ``kill`` (SIGKILL), ``stop`` (SIGSTOP), ``raise`` (ValueError), ``exit``
  (``os._exit(3)``), ``sysexit`` (``sys.exit(3)``), ``never`` (the victim never
  calls ``tps.initialize``), ``catch`` (the survivor catches the fault's exception
  and calls ``sys.exit(42)``; the victim is killed) or ``none`` (every process
  finishes normally).
- VICTIM: the process id that suffers it.
- HEARTBEAT: ``tps.initialize(heartbeat_timeout=...)``, ``default`` for the
  default settings, or ``strategy`` to skip ``tps.initialize`` and let
  ``tps.MultiWorkerMirroredStrategy()`` join the job from ``TF_CONFIG`` (it then
  writes ``DIR/joined<i>``: the process count and replica count it saw).
- WHERE the others wait: ``compiled`` (a jitted sum over every process's devices,
  read back with ``np.asarray``; default), ``allgather``
  (``multihost_utils.process_allgather``) or ``sleep`` (Python code).

Each process writes ``DIR/p<i>.pid`` (its OS pid) first and ``DIR/ready<i>`` once
it joined; the victim writes ``DIR/fault`` (the wall-clock time) just before its
fault.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sys
import time

fault, victim, out = sys.argv[1], int(sys.argv[2]), pathlib.Path(sys.argv[3])
heartbeat = sys.argv[4]
where = sys.argv[5] if len(sys.argv) > 5 else "compiled"
if "TF_CONFIG" in os.environ:
    me = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
else:
    me = int(os.environ["TPS_PROCESS_ID"])
(out / f"p{me}.pid").write_text(str(os.getpid()))

if fault == "never" and me == victim:
    time.sleep(600)

import tpustrategy as tps  # noqa: E402

if heartbeat == "strategy":
    strategy = tps.MultiWorkerMirroredStrategy()
    import jax

    (out / f"joined{me}").write_text(json.dumps([jax.process_count(),
                                                 strategy.num_replicas_in_sync]))
else:
    settings = {} if heartbeat == "default" else {
        "heartbeat_timeout": int(heartbeat), "initialization_timeout": 3 * int(heartbeat) + 5,
        "shutdown_timeout": 3 * int(heartbeat), "collective_timeout": 4 * int(heartbeat)}
    tps.initialize(**settings)

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402

mesh = jax.make_mesh((jax.device_count(),), ("x",))
local = np.ones((jax.local_device_count(),), np.float32)
x = jax.make_array_from_process_local_data(NamedSharding(mesh, PartitionSpec("x")), local)
total = jax.jit(lambda a: a.sum())


def step() -> None:
    if where == "compiled":
        assert float(np.asarray(total(x))) == jax.device_count()
    elif where == "allgather":
        multihost_utils.process_allgather(np.int32(me))
    else:
        time.sleep(0.1)


step()
(out / f"ready{me}").write_text("1")
print("ready", flush=True)
for i in range(50 if fault == "none" else 10**9):
    if me == victim and i == 5 and fault != "none":
        (out / "fault").write_text(repr(time.time()))
        if fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif fault == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif fault == "raise":
            raise ValueError(f"boom in process {me}")
        elif fault == "exit":
            os._exit(3)
        elif fault == "sysexit":
            sys.exit(3)
        elif fault == "catch":
            os.kill(os.getpid(), signal.SIGKILL)
    try:
        step()
    except (tps.errors.UnavailableError, tps.errors.DeadlineExceededError) as error:
        if fault != "catch":
            raise
        print(f"caught {type(error).__name__}", file=sys.stderr, flush=True)
        sys.exit(42)
    time.sleep(0.05)
print("done", flush=True)
