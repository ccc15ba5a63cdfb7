"""The demo's checkpoints: one per epoch, and ``--resume`` to continue bit-identically.

The checkpoint holds what the next epoch depends on: the model and optimizer
variables, the distributed input iterator (its position, shuffle buffer and
random state), the number of finished epochs and the loss curve so far (a
JSON string: its length grows with the run). A job stopped at any point and
started again with ``--resume`` continues from the last finished epoch and
computes exactly the losses the uninterrupted job would have; ``--resume``
with a larger ``--epochs`` trains on, as if the first run had been longer.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np

import tpustrategy as tps


def available() -> bool:
    """Whether orbax-checkpoint (the ``checkpoint`` extra, which writes arrays) is installed."""
    import importlib.util

    return importlib.util.find_spec("orbax") is not None and importlib.util.find_spec("orbax.checkpoint") is not None


def folder_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(path) for n in names)


class EpochCheckpoints:
    """Saves ``objects`` plus the epoch count and loss curve after every epoch.

    Args:
      directory: where the checkpoints go (the newest two are kept).
      **objects: the training state (variables, optimizer state, iterator).

    Attributes:
      curve: the loss of every step so far (restored by ``start``).
    """

    def __init__(self, directory: str, **objects: Any):
        self.enabled = available()
        if not self.enabled:
            print("checkpoints are off: pip install 'tpustrategy[checkpoint]' (orbax-checkpoint) to save "
                  "one per epoch and --resume.", flush=True)
        self.curve: list[float] = []
        self.checkpoint = tps.train.Checkpoint(**objects, epoch=0, loss_curve="[]")
        self.manager = tps.train.CheckpointManager(self.checkpoint, directory, max_to_keep=2)
        self.save_seconds: list[float] = []
        self.restore_seconds: float | None = None
        self.restored: str | None = None

    def start(self, resume: bool) -> int:
        """Restores the latest checkpoint when ``resume``; returns the epoch to start from."""
        if not resume:
            return 0
        if not self.enabled:
            raise SystemExit("--resume needs orbax-checkpoint: pip install 'tpustrategy[checkpoint]'.")
        start = time.perf_counter()
        self.restored = self.manager.restore_or_initialize()
        if self.restored is None:
            print(f"--resume: no checkpoint in {self.manager.directory}; starting from scratch.", flush=True)
            return 0
        self.restore_seconds = time.perf_counter() - start
        print(f"resumed from {self.restored} (epoch {self.checkpoint.epoch}) in "
              f"{self.restore_seconds:.2f} s", flush=True)
        self.curve = [float(x) for x in json.loads(self.checkpoint.loss_curve)]
        return int(self.checkpoint.epoch)

    def save(self, epoch: int) -> str | None:
        """Saves the state after ``epoch`` finished epochs."""
        if not self.enabled:
            return None
        start = time.perf_counter()
        self.checkpoint.epoch = epoch
        self.checkpoint.loss_curve = json.dumps(self.curve)  # floats round-trip exactly
        path = self.manager.save(checkpoint_number=epoch)
        self.save_seconds.append(time.perf_counter() - start)
        return path

    def describe(self) -> str:
        latest = self.manager.latest_checkpoint
        if not self.enabled:
            return "(off: orbax-checkpoint is not installed)"
        if latest is None:
            return "(none saved)"
        text = (f"{latest} ({folder_bytes(latest) / 1024:.0f} KiB; save "
                f"{np.mean(self.save_seconds) if self.save_seconds else 0.0:.2f} s per epoch")
        if self.restored is not None:
            text += f"; resumed from {os.path.basename(self.restored)} in {self.restore_seconds:.2f} s"
        return text + ")"
