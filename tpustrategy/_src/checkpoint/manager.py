"""``tps.train.CheckpointManager`` and ``tps.train.latest_checkpoint``.

The manager numbers checkpoints ``<directory>/<checkpoint_name>-<N>``, keeps
the newest ``max_to_keep`` of them (plus one every
``keep_checkpoint_every_n_hours``), skips saves closer than
``checkpoint_interval`` steps, and finds the latest one again after a
restart by listing the folder: only committed checkpoints are listed, so an
interrupted save is never returned. Semantics follow ``tf.train.CheckpointManager``.
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Callable
from typing import Any

from tpustrategy._src.checkpoint import files, multihost
from tpustrategy._src.checkpoint.checkpoint import Checkpoint, _check_path

_API = "tps.train.CheckpointManager"


def latest_checkpoint(checkpoint_dir: str | os.PathLike[str], latest_filename: str | None = None) -> str | None:
    """The path of the most recently saved complete checkpoint in ``checkpoint_dir``, or None.

    Args:
      checkpoint_dir: the folder the checkpoints were saved in.
      latest_filename: accepted for compatibility with ``tf.train.latest_checkpoint``.

    Returns:
      A path to pass to ``Checkpoint.restore``; None when the folder holds no
      complete numbered checkpoint (an interrupted save is never returned).
    """
    return files.latest(_check_path(checkpoint_dir, "tps.train.latest_checkpoint", "checkpoint_dir"))


def _positive_int(value: Any, arg: str, allow_none: bool) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"{_API}: expected a positive integer{' or `None`' if allow_none else ''} for "
            f"`{arg}`, got {value!r}.\nFix: e.g. {arg}=5."
        )
    return value


def _step(value: Any) -> int:
    value = value() if callable(value) and not hasattr(value, "numpy") else value
    return int(value)


class CheckpointManager:
    """Saves numbered checkpoints of a ``Checkpoint`` and deletes old ones.

    Args:
      checkpoint: the ``tps.train.Checkpoint`` to save and restore.
      directory: the folder of the checkpoints (created when needed).
      max_to_keep: how many recent checkpoints to keep (None: all).
      keep_checkpoint_every_n_hours: also keep one checkpoint per this many hours.
      checkpoint_name: the checkpoints' name prefix (``ckpt-1``, ``ckpt-2``, ...).
      step_counter: a ``tps.Variable``, int-like or callable giving the training
        step; needed with ``checkpoint_interval``.
      checkpoint_interval: save only when the step advanced this much since
        the last save.
      init_fn: called by ``restore_or_initialize`` when there is nothing to restore.

    Example:
      >>> manager = tps.train.CheckpointManager(ckpt, "/tmp/ckpts", max_to_keep=3)
      >>> manager.restore_or_initialize()       # the latest checkpoint, or None
      >>> for step in range(start, steps):
      ...     train_step(iterator)
      ...     manager.save(checkpoint_number=step + 1)
    """

    def __init__(self, checkpoint: Checkpoint, directory: str | os.PathLike[str], max_to_keep: int | None = 5,
                 keep_checkpoint_every_n_hours: float | None = None, checkpoint_name: str = "ckpt",
                 step_counter: Any = None, checkpoint_interval: int | None = None,
                 init_fn: Callable[[], Any] | None = None):
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(
                f"{_API}: checkpoint must be a tps.train.Checkpoint; received "
                f"{type(checkpoint).__name__}.\nFix: CheckpointManager(tps.train.Checkpoint("
                "model=..., iterator=...), directory, max_to_keep=3)."
            )
        self._checkpoint = checkpoint
        self._directory = _check_path(directory, _API, "directory")
        self._max_to_keep = _positive_int(max_to_keep, "max_to_keep", allow_none=True)
        if keep_checkpoint_every_n_hours is not None and not keep_checkpoint_every_n_hours > 0:
            raise ValueError(f"{_API}: keep_checkpoint_every_n_hours must be > 0 or None; got "
                             f"{keep_checkpoint_every_n_hours!r}.")
        self._keep_hours = keep_checkpoint_every_n_hours
        if not isinstance(checkpoint_name, str) or not checkpoint_name or "/" in checkpoint_name:
            raise ValueError(f"{_API}: checkpoint_name must be a non-empty name without '/'; got "
                             f"{checkpoint_name!r}.")
        self._name = checkpoint_name
        self._interval = _positive_int(checkpoint_interval, "checkpoint_interval", allow_none=True)
        if self._interval is not None and step_counter is None:
            raise ValueError(
                f"{_API}: `step_counter` should be passed if `checkpoint_interval` is not None "
                "(the interval counts training steps).\nFix: CheckpointManager(..., "
                "step_counter=step_variable, checkpoint_interval=100)."
            )
        if init_fn is not None and not callable(init_fn):
            raise TypeError(f"{_API}: init_fn must be callable or None; got {type(init_fn).__name__}.")
        self._step_counter = step_counter
        self._init_fn = init_fn
        self._last_step: int | None = None
        self._maybe_delete: collections.OrderedDict[str, float] = collections.OrderedDict(
            (path, manifest.get("time_ns", 0) / 1e9)
            for path, manifest in files.committed(self._directory, self._name))
        self._latest = next(reversed(self._maybe_delete)) if self._maybe_delete else None
        self._last_preserved = time.time()

    # Properties -------------------------------------------------------------------------------
    @property
    def directory(self) -> str:
        return self._directory

    @property
    def checkpoint(self) -> Checkpoint:
        return self._checkpoint

    @property
    def checkpoint_interval(self) -> int | None:
        return self._interval

    @property
    def latest_checkpoint(self) -> str | None:
        """The newest checkpoint this manager saved or found in its folder (None if none)."""
        return self._latest

    @property
    def checkpoints(self) -> list[str]:
        """The checkpoints kept, oldest first."""
        return list(self._maybe_delete)

    # Saving and restoring ----------------------------------------------------------------------
    def save(self, checkpoint_number: Any = None, check_interval: bool = True, options: Any = None) -> str | None:
        """Saves a checkpoint and deletes those beyond ``max_to_keep``.

        Args:
          checkpoint_number: the number in the name (default: the checkpoint's
            ``save_counter`` after this save); an int or a variable.
          check_interval: with ``checkpoint_interval``, skip the save when the
            step did not advance enough (False: only skip a repeated step).
          options: accepted for compatibility.

        Returns:
          The path saved, or None when skipped because of the interval.
        """
        api = "CheckpointManager.save"
        if self._interval is not None:
            step = multihost.agree(api, "the step counter", _step(self._step_counter))
            if self._last_step is not None:
                if step == self._last_step:
                    return None
                if check_interval and step < self._last_step + self._interval:
                    return None
            self._last_step = step
        counter = self._checkpoint.save_counter + 1
        number = counter if checkpoint_number is None else _step(checkpoint_number)
        number = multihost.agree(api, "the checkpoint number", number)
        path = os.path.join(self._directory, f"{self._name}-{number}")
        self._checkpoint._save_as(path, number, counter, api)
        self._maybe_delete.pop(path, None)
        self._maybe_delete[path] = time.time()
        self._latest = path
        self._sweep()
        return path

    def _sweep(self) -> None:
        if self._max_to_keep is None:
            return
        while len(self._maybe_delete) > self._max_to_keep:
            path, timestamp = self._maybe_delete.popitem(last=False)
            if self._keep_hours and timestamp - self._keep_hours * 3600.0 >= self._last_preserved:
                self._last_preserved = timestamp
                continue
            if multihost.process_index() == 0:
                files.remove(path)

    def restore_or_initialize(self) -> str | None:
        """Restores the latest checkpoint and returns its path, or runs ``init_fn`` and returns None."""
        if self._latest is not None:
            self._checkpoint.restore(self._latest)
            if self._interval is not None:
                self._last_step = _step(self._step_counter)
            return self._latest
        if self._init_fn is not None:
            self._init_fn()
        return None

    def sync(self) -> None:
        """Waits for pending saves (saves are synchronous; TF compatibility)."""
