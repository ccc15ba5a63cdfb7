"""Overwrites a checkpoint and dies (``os._exit``) at one file operation (test_overwrite_kill_points.py).

Usage: ``worker_kill_point.py PATH AT``. Writes ``PATH`` with ``step=1`` (arrays
made from 1), then writes it again with ``step=2`` while counting the file
operations of its commit (``files.commit``: manifest, renames, fsyncs,
deletion of the previous copy file by file); at operation ``AT`` the process
ends at once, without cleanup, as a killed process does. ``AT=0`` kills
nothing and prints each operation as ``OP <n> <name>``. Prints ``DONE`` when
the write finished.
"""

from __future__ import annotations

import os
import shutil
import sys

import numpy as np

import tpustrategy as tps
from tpustrategy._src.checkpoint import files

path, at = sys.argv[1], int(sys.argv[2])
tps.train.Checkpoint(w=np.full(256, 1, np.float32), v=np.arange(7), step=1).write(path)

calls = 0
in_commit = False


def counted(name, original):
    def op(*args, **kwargs):
        global calls
        if in_commit:
            calls += 1
            if calls == at:
                os._exit(75)  # killed: no finally, no cleanup, no buffered output
            if at == 0:
                print(f"OP {calls} {name}", flush=True)
        return original(*args, **kwargs)
    return op


for module, name in [(os, "rename"), (os, "replace"), (os, "fsync"), (os, "unlink"), (os, "remove"),
                     (os, "rmdir"), (os, "mkdir"), (shutil, "rmtree")]:
    setattr(module, name, counted(name, getattr(module, name)))
commit = files.commit


def traced_commit(*args, **kwargs):
    global in_commit
    in_commit = True
    try:
        return commit(*args, **kwargs)
    finally:
        in_commit = False


files.commit = traced_commit
tps.train.Checkpoint(w=np.full(256, 2, np.float32), v=np.arange(7) * 2, step=2).write(path)
print("DONE", flush=True)
