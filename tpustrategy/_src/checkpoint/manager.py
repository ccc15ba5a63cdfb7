"""``tps.train.CheckpointManager`` and ``tps.train.latest_checkpoint``.

The manager numbers checkpoints ``<directory>/<checkpoint_name>-<N>``, keeps
the newest ``max_to_keep`` of them (plus one every
``keep_checkpoint_every_n_hours``), skips saves closer than
``checkpoint_interval`` steps, and finds the latest one again after a
restart through the folder's ``checkpoint`` state file (TensorFlow's, written
atomically after every save: the latest is the checkpoint named there, never
the newest by the clock; see ``recovery``). Only committed checkpoints are
listed, so an interrupted save is never returned, and a damaged newest one is
returned (restoring it raises, naming the previous one) rather than skipped.
A manager's start resolves what crashes left in its folder. Semantics follow
``tf.train.CheckpointManager``.
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Callable
from typing import Any

from tpustrategy._src.checkpoint import asynchronous, multihost, recovery
from tpustrategy._src.checkpoint import options as options_lib
from tpustrategy._src.checkpoint.checkpoint import Checkpoint, _check_path
from tpustrategy._src.checkpoint.options import CheckpointOptions
from tpustrategy._src.checkpoint.tf_format import tf_writer

_API = "tps.train.CheckpointManager"


def latest_checkpoint(checkpoint_dir: str | os.PathLike[str], latest_filename: str | None = None) -> str | None:
    """The path of the most recently saved complete checkpoint in ``checkpoint_dir``, or None.

    Args:
      checkpoint_dir: the folder the checkpoints were saved in.
      latest_filename: the state file's name (default ``"checkpoint"``), as
        in ``tf.train.latest_checkpoint``.

    Returns:
      A path to pass to ``Checkpoint.restore``: the one the folder's state
      file names (or a newer one committed just before a crash), else the
      highest-numbered one; None when the folder holds no complete numbered
      checkpoint (an interrupted save is never returned).
    """
    directory = _check_path(checkpoint_dir, "tps.train.latest_checkpoint", "checkpoint_dir")
    return recovery.latest(directory, latest_filename)


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
      format: what ``save`` writes unless it is given its own ``format``:
        ``"tpustrategy"`` (this library's checkpoint folders, the default) or
        ``"tensorflow"`` (TensorFlow's ``ckpt-N.index`` +
        ``ckpt-N.data-00000-of-00001`` files, which ``tf.train.Checkpoint``
        restores), as ``Checkpoint.write(path, format=...)``. Either way the
        folder's ``checkpoint`` state file lists the kept checkpoints
        (``all_model_checkpoint_paths``), ``max_to_keep`` and
        ``keep_checkpoint_every_n_hours`` apply, and ``restore`` reads both.

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
                 init_fn: Callable[[], Any] | None = None, *, format: str = "tpustrategy"):
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
        tf_writer.wants_tensorflow(format, _API)  # checks the argument
        self._format = format
        self._last_step: int | None = None
        if multihost.process_index() == 0:
            recovery.clean_leftovers(self._directory, self._name)
        kept, latest, last_preserved = recovery.tracked(self._directory, self._name)
        self._maybe_delete: collections.OrderedDict[str, float] = collections.OrderedDict(kept)
        self._latest = latest
        self._last_preserved = time.time() if last_preserved is None else last_preserved

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
    def save(self, checkpoint_number: Any = None, check_interval: bool = True,
             options: CheckpointOptions | None = None, *, format: str | None = None) -> str | None:
        """Saves a checkpoint and deletes those beyond ``max_to_keep``.

        Args:
          checkpoint_number: the number in the name (default: the checkpoint's
            ``save_counter`` after this save); an int or a variable.
          check_interval: with ``checkpoint_interval``, skip the save when the
            step did not advance enough (False: only skip a repeated step).
          options: a ``tps.train.CheckpointOptions`` (``enable_async=True``:
            return once the arrays are in host memory; ``sync()`` waits).
          format: ``"tpustrategy"`` or ``"tensorflow"`` (TensorFlow's files);
            None: the manager's ``format``.

        Returns:
          The path saved, or None when skipped because of the interval.
        """
        api = "CheckpointManager.save"
        options = options_lib.check(options, api)
        tensorflow = tf_writer.wants_tensorflow(self._format if format is None else format, api)
        if self._interval is not None:
            step = multihost.agree(api, "the step counter", _step(self._step_counter))
            if self._last_step is not None:
                if step == self._last_step:
                    return None
                if check_interval and step < self._last_step + self._interval:
                    return None
            self._last_step = step
        self._wait()
        counter = self._checkpoint.save_counter + 1
        number = counter if checkpoint_number is None else _step(checkpoint_number)
        number = multihost.agree(api, "the checkpoint number", number)
        path = os.path.join(self._directory, f"{self._name}-{number}")
        kept = collections.OrderedDict(self._maybe_delete)
        kept.pop(path, None)
        kept[path] = time.time()
        doomed, last_preserved = self._sweep(kept)
        directory, name = self._directory, self._name
        record = list(kept.items())

        def after_commit() -> None:  # on the folder's owner, once the checkpoint is committed
            hidden = recovery.hide_all(doomed)  # out of sight before the state file drops them
            recovery.write_state(directory, record, path, last_preserved)
            recovery.purge(hidden)
            recovery.clean_leftovers(directory, name)

        if tensorflow:  # TensorFlow's files, written synchronously (`tf_writer`), then the same bookkeeping
            tf_writer.write(self._checkpoint, path, counter, api)
            self._checkpoint._save_counter = counter
            if multihost.process_index() == 0:
                after_commit()
            multihost.barrier("tensorflow-format-save")
            self._checkpoint._run_write_callbacks(options, path)
        else:
            self._checkpoint._save_as(path, number, counter, api, options, then=after_commit)
        self._maybe_delete, self._latest, self._last_preserved = kept, path, last_preserved
        return path

    def _sweep(self, kept: collections.OrderedDict[str, float]) -> tuple[list[str], float]:
        """Drops the checkpoints beyond ``max_to_keep`` from ``kept``; returns them."""
        doomed: list[str] = []
        last_preserved = self._last_preserved
        if self._max_to_keep is None:
            return doomed, last_preserved
        while len(kept) > self._max_to_keep:
            path, timestamp = kept.popitem(last=False)
            if self._keep_hours and timestamp - self._keep_hours * 3600.0 >= last_preserved:
                last_preserved = timestamp
                continue
            doomed.append(path)
        return doomed, last_preserved

    def restore_or_initialize(self) -> str | None:
        """Restores the latest checkpoint and returns its path, or runs ``init_fn`` and returns None."""
        self._wait()
        if self._latest is not None:
            self._checkpoint.restore(self._latest)
            if self._interval is not None:
                self._last_step = _step(self._step_counter)
            return self._latest
        if self._init_fn is not None:
            self._init_fn()
        return None

    def sync(self) -> None:
        """Waits until asynchronous saves are written and committed (raises their error)."""
        self._wait()
        self._checkpoint.sync()

    def _wait(self) -> None:
        """Waits for asynchronous saves; after a failed one, the folder is read again."""
        try:
            asynchronous.wait_all()
        except BaseException:
            kept, latest, last_preserved = recovery.tracked(self._directory, self._name)
            self._maybe_delete = collections.OrderedDict(kept)
            self._latest = latest
            raise
