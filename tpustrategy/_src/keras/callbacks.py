"""Keras's file-writing callbacks on several processes: only the chief writes the real files.

Every process of a multi-worker job runs the same ``fit`` and so the same callbacks. Keras 3's
``BackupAndRestore`` and ``ModelCheckpoint`` would have every process write the same path (one
shared backup directory: ``FileExistsError``, an HDF5 lock error, or a torn file). tf.keras's rule,
kept here: the chief (process 0) writes the real files; every other process saves too — its
reads of the variables are the same programs as the chief's, so no process waits alone in a
collective — but into a temporary directory of its own, deleted at once. ``BackupAndRestore``
then restores every process from the shared directory, after a barrier so the chief's last backup
is complete; only the chief deletes it at the end of training. In one process nothing changes.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import tpustrategy._src.keras.internals as internals
from tpustrategy._src.replica import across_processes


def _processes() -> tuple[int, int]:
    import jax

    return jax.process_index(), jax.process_count()


def is_chief() -> bool:
    """Process 0 of the job is the chief (TensorFlow's worker 0 when no ``chief`` task is named)."""
    return _processes()[0] == 0


def several_processes() -> bool:
    return _processes()[1] > 1


@contextlib.contextmanager
def _worker_dir(kind: str) -> Iterator[str]:
    """A temporary directory of this (non-chief) process, removed afterwards."""
    path = tempfile.mkdtemp(prefix=f"tps-{kind}-worker{_processes()[0]}-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def wrap_backup_save(original: Any) -> Any:
    @functools.wraps(original)
    def _save_model(self: Any) -> Any:
        if not several_processes() or is_chief():
            return original(self)
        with _worker_dir("backup") as scratch:
            shared = internals.backup_paths(self)
            internals.set_backup_paths(self, {
                name: scratch if name == "backup_dir" else os.path.join(scratch, os.path.basename(path))
                for name, path in shared.items()})
            try:
                return original(self)
            finally:
                internals.set_backup_paths(self, shared)

    return _save_model


def wrap_backup_train_begin(original: Any) -> Any:
    @functools.wraps(original)
    def on_train_begin(self: Any, logs: Any = None) -> Any:
        if several_processes():
            across_processes.barrier("tps.keras:backup-restore")   # the chief's last backup is complete before anyone reads it
        return original(self, logs)

    return on_train_begin


def wrap_backup_train_end(original: Any) -> Any:
    @functools.wraps(original)
    def on_train_end(self: Any, logs: Any = None) -> Any:
        if not several_processes() or is_chief():
            return original(self, logs)
        return None   # the shared directory is the chief's to delete

    return on_train_end


def wrap_checkpoint_save(original: Any) -> Any:
    @functools.wraps(original)
    def _save_model(self: Any, epoch: Any, batch: Any, logs: Any) -> Any:
        if not several_processes() or is_chief():
            return original(self, epoch, batch, logs)
        with _worker_dir("checkpoint") as scratch:
            shared = self.filepath
            self.filepath = os.path.join(scratch, os.path.basename(shared))
            try:
                return original(self, epoch, batch, logs)
            finally:
                self.filepath = shared

    return _save_model
