"""``tps.train.CheckpointOptions`` (``tf.train.CheckpointOptions``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

_API = "tps.train.CheckpointOptions"


class CheckpointOptions:
    """Options for saving and restoring checkpoints, as ``tf.train.CheckpointOptions``.

    Accepted by ``Checkpoint(..., options=)``, ``Checkpoint.save``/``write``/
    ``restore``/``read`` and ``CheckpointManager.save``.

    Args:
      experimental_io_device: the device that does the file I/O in TensorFlow
        (e.g. ``"/job:localhost"``). Accepted; here the host always writes the
        files (each process its own part).
      experimental_enable_async_checkpoint: save asynchronously: the call
        returns once every array is copied to host memory, and the files are
        written by a background thread while training goes on. The next save,
        ``restore``, ``sync()`` and exit wait for it.
      experimental_write_callbacks: callables run after a checkpoint is
        committed, with its path (or with no argument, if they take none).
      enable_async: the same as ``experimental_enable_async_checkpoint``
        (TensorFlow's newer name).
      experimental_skip_slot_variables: when restoring, leave optimizer state
        (slot variables: moments, accumulators, ...) as it is and restore
        everything else.
      experimental_sharding_callback: TensorFlow's callback that splits a
        checkpoint's tensors into data files; accepted (a callable or None)
        and unused by tpustrategy's format, which orbax shards by array.

    Raises:
      TypeError: an argument of the wrong type.
    """

    __slots__ = ("experimental_io_device", "experimental_enable_async_checkpoint",
                 "experimental_write_callbacks", "enable_async", "experimental_sharding_callback",
                 "experimental_skip_slot_variables")

    def __init__(self, experimental_io_device: str | None = None,
                 experimental_enable_async_checkpoint: bool = False,
                 experimental_write_callbacks: Sequence[Callable[..., Any]] | None = None,
                 enable_async: bool = False, experimental_skip_slot_variables: bool = False,
                 experimental_sharding_callback: Any = None):
        if experimental_io_device is not None and not isinstance(experimental_io_device, str):
            raise TypeError(
                f"{_API}: experimental_io_device must be a device name (str) or None; received "
                f"{type(experimental_io_device).__name__}: {experimental_io_device!r}.\nFix: e.g. "
                "CheckpointOptions(experimental_io_device='/job:localhost').")
        for name, value in (("experimental_enable_async_checkpoint", experimental_enable_async_checkpoint),
                            ("enable_async", enable_async),
                            ("experimental_skip_slot_variables", experimental_skip_slot_variables)):
            if not isinstance(value, bool):
                raise TypeError(f"{_API}: {name} must be True or False; received "
                                f"{type(value).__name__}: {value!r}.\nFix: {name}=True.")
        callbacks = None
        if experimental_write_callbacks is not None:
            callbacks = list(experimental_write_callbacks) if isinstance(
                experimental_write_callbacks, (list, tuple)) else None
            if callbacks is None or not all(callable(c) for c in callbacks):
                raise TypeError(
                    f"{_API}: experimental_write_callbacks must be a list of callables (each "
                    f"taking the checkpoint's path, or nothing); received "
                    f"{experimental_write_callbacks!r}.\nFix: experimental_write_callbacks="
                    "[lambda path: print('saved', path)].")
        if experimental_sharding_callback is not None and not callable(experimental_sharding_callback):
            raise TypeError(
                f"{_API}: experimental_sharding_callback must be a callable (TensorFlow's "
                f"ShardingCallback) or None; received {type(experimental_sharding_callback).__name__}: "
                f"{experimental_sharding_callback!r}.\nFix: leave it None (tpustrategy's format "
                "is sharded by array).")
        self.experimental_io_device = experimental_io_device
        self.experimental_enable_async_checkpoint = experimental_enable_async_checkpoint
        self.experimental_write_callbacks = callbacks
        self.enable_async = enable_async
        self.experimental_skip_slot_variables = experimental_skip_slot_variables
        self.experimental_sharding_callback = experimental_sharding_callback

    @property
    def asynchronous(self) -> bool:
        """Whether saves are asynchronous (either of the two flags)."""
        return self.enable_async or self.experimental_enable_async_checkpoint

    def __copy__(self) -> CheckpointOptions:
        return CheckpointOptions(**{name: getattr(self, name) for name in self.__slots__})

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__
                           if getattr(self, n) not in (None, False))
        return f"CheckpointOptions({fields})"


def check(options: Any, api: str) -> CheckpointOptions | None:
    """``options`` after checking it is a ``CheckpointOptions`` or None."""
    if options is None or isinstance(options, CheckpointOptions):
        return options
    raise TypeError(
        f"{api}: options must be a tps.train.CheckpointOptions or None; received "
        f"{type(options).__name__}: {options!r}.\nFix: options=tps.train.CheckpointOptions("
        "enable_async=True).")


def merged(call: CheckpointOptions | None, default: CheckpointOptions | None) -> CheckpointOptions:
    """The options of one call: its own, else the Checkpoint's, else the defaults."""
    return call or default or CheckpointOptions()


def run_write_callbacks(options: CheckpointOptions, path: str) -> None:
    """Runs ``experimental_write_callbacks`` after a commit, as TensorFlow does."""
    for callback in options.experimental_write_callbacks or ():
        try:
            takes_path = len(inspect.signature(callback).parameters) > 0
        except (TypeError, ValueError):
            takes_path = True
        callback(path) if takes_path else callback()
