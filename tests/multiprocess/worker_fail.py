"""Worker of test_failures.py: processes that die, hang or never join.

Usage: ``worker_fail.py MODE PID_DIR [HEARTBEAT_S]`` under the launcher, where MODE is
``die`` (process 1 exits with code 3 after start-up while process 0 waits in
a collective) or ``hang`` (every process sleeps). Each process first writes
its OS pid to ``PID_DIR/p<i>.pid`` so the test can check none survives.
"""

from __future__ import annotations

import os
import pathlib
import sys
import time

import tpustrategy as tps

mode, pid_dir = sys.argv[1], pathlib.Path(sys.argv[2])
heartbeat = int(sys.argv[3]) if len(sys.argv) > 3 else 30
# The pid file first (the launcher names the process in the environment): on a loaded machine
# a peer may fail while this process is still starting up, and the test checks every pid.
(pid_dir / f"p{os.environ['TPS_PROCESS_ID']}.pid").write_text(str(os.getpid()))
config = tps.initialize(initialization_timeout=30, heartbeat_timeout=heartbeat,
                        shutdown_timeout=5, collective_timeout=60)

import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402

print(f"ready {mode}", flush=True)
if mode == "die":
    if config.process_id == 1:
        # Die once process 0 is past start-up (bounded: its pid file exists before it starts).
        deadline = time.monotonic() + 20
        while not (pid_dir / "p0.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os._exit(3)
    time.sleep(0.5)
    multihost_utils.process_allgather(np.int32(1))  # waits for process 1, which is gone
    time.sleep(600)
elif mode == "hang":
    time.sleep(600)
