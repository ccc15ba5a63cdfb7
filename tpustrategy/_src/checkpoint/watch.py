"""``tf.train.get_checkpoint_state`` and ``tf.train.checkpoints_iterator``: a folder's checkpoints over time.

Both read the folder's ``checkpoint`` state file (`state_file`), which our
saves and TensorFlow's both write, so they work for either kind of
checkpoint. ``checkpoints_iterator`` is the evaluation loop's "wait for the
next checkpoint" of TensorFlow: it yields each new latest checkpoint once,
polling once a second, until ``timeout`` seconds pass without one and
``timeout_fn`` (if given) says to stop.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from tpustrategy._src.checkpoint import recovery, state_file

_log = logging.getLogger("tpustrategy.checkpoint")


def _folder(value: Any, api: str) -> str:
    if isinstance(value, (str, os.PathLike)) and os.fspath(value):
        return os.fspath(value)
    raise TypeError(
        f"{api}: checkpoint_dir must be a folder path (str or os.PathLike); received "
        f"{type(value).__name__}: {value!r}.\nFix: pass the folder the checkpoints are saved in, "
        f"e.g. {api}('/tmp/ckpts').")


def get_checkpoint_state(checkpoint_dir: str | os.PathLike[str],
                         latest_filename: str | None = None) -> state_file.CheckpointState | None:
    """The folder's ``checkpoint`` state file (``tf.train.get_checkpoint_state``).

    Returns:
      A `CheckpointState` (``model_checkpoint_path``,
      ``all_model_checkpoint_paths``, timestamps) with every path absolute
      (relative ones are taken relative to the folder), or None when the
      folder has no state file, or an unreadable one (with a warning, as TF).
    """
    directory = _folder(checkpoint_dir, "tps.train.get_checkpoint_state")
    return recovery.read_state(directory, latest_filename)


def _check_seconds(value: Any, arg: str, api: str, allow_none: bool) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(
            f"{api}: {arg} must be a number of seconds >= 0{' or None' if allow_none else ''}; "
            f"received {value!r}.\nFix: e.g. {arg}=60.")
    return float(value)


def wait_for_new_checkpoint(checkpoint_dir: str | os.PathLike[str], last_checkpoint: str | None = None,
                            seconds_to_sleep: float = 1, timeout: float | None = None) -> str | None:
    """Waits until the folder's latest checkpoint is not ``last_checkpoint``; returns it (None on timeout)."""
    api = "tps.train.checkpoints_iterator"
    directory = _folder(checkpoint_dir, api)
    stop = None if timeout is None else time.monotonic() + timeout
    while True:
        path = recovery.latest(directory)
        if path is not None and path != last_checkpoint:
            return path
        if stop is not None and time.monotonic() + seconds_to_sleep > stop:
            return None
        time.sleep(seconds_to_sleep)


def checkpoints_iterator(checkpoint_dir: str | os.PathLike[str], min_interval_secs: float = 0,
                         timeout: float | None = None,
                         timeout_fn: Callable[[], bool] | None = None) -> Iterator[str]:
    """Yields each new latest checkpoint of a folder (``tf.train.checkpoints_iterator``).

    Args:
      checkpoint_dir: the folder the checkpoints are saved in.
      min_interval_secs: at least this many seconds between two yields.
      timeout: seconds to wait for a new checkpoint (None: forever).
      timeout_fn: called after a timeout; the iteration ends when it returns
        True, else waiting starts again. Without it, a timeout ends it.

    Example:
      >>> for path in tps.train.checkpoints_iterator("/tmp/ckpts", timeout=600):
      ...     ckpt.restore(path).expect_partial(); evaluate()
    """
    api = "tps.train.checkpoints_iterator"
    directory = _folder(checkpoint_dir, api)
    interval = _check_seconds(min_interval_secs, "min_interval_secs", api, allow_none=False)
    timeout = _check_seconds(timeout, "timeout", api, allow_none=True)
    if timeout_fn is not None and not callable(timeout_fn):
        raise TypeError(f"{api}: timeout_fn must be callable or None; received {timeout_fn!r}.\n"
                        "Fix: e.g. timeout_fn=lambda: training_done.is_set().")
    last = None
    while True:
        path = wait_for_new_checkpoint(directory, last, timeout=timeout)
        if path is None:
            if timeout_fn is None:
                _log.info("Timed-out waiting for a checkpoint.")
                return
            if timeout_fn():
                return
            continue
        start = time.monotonic()
        last = path
        yield path
        remaining = start + (interval or 0.0) - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)
