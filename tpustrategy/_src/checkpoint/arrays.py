"""Array data on disk through ``orbax-checkpoint`` (an optional dependency).

One flat dict ``{"a0": array, "a1": ...}`` per checkpoint, written and read
with orbax's PyTree handler: a sharded ``jax.Array`` is written shard by
shard, each replicated shard once (by the process that holds replica 0 of
it), NumPy arrays by the primary process only; reading places every array
on the sharding of its target, so a value saved on 8 devices restores onto 4.
Orbax is imported only when a checkpoint holds arrays, with an install hint
when it is missing.

Arrays are written without compression, as TensorFlow writes its checkpoints:
trained weights barely compress (zstd saves ~8% on float32 weights) and
compressing and decompressing them cost more than the disk time they save
(``benchmarks/checkpoint_speed.py``). Checkpoints written compressed (by an
earlier version, or by orbax elsewhere) are read as they are.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from tpustrategy._src.errors import DataLossError

INSTALL_HINT = (
    "Fix: pip install 'tpustrategy[checkpoint]' (or pip install orbax-checkpoint), the "
    "library that writes array data."
)


def _orbax(api: str) -> Any:
    try:
        import orbax.checkpoint as ocp
    except ImportError as e:  # pragma: no cover - the test environment has orbax
        raise ImportError(
            f"{api}: saving or restoring arrays and variables needs orbax-checkpoint, which is "
            f"not installed ({e}).\n{INSTALL_HINT}"
        ) from e
    return ocp


def _handler(ocp: Any) -> Any:
    return ocp.PyTreeCheckpointHandler(use_compression=False)


def save(directory: str, arrays: dict[str, Any], api: str) -> None:
    """Writes ``arrays`` (``jax.Array`` or NumPy) into the new folder ``directory``."""
    ocp = _orbax(api)
    with ocp.Checkpointer(_handler(ocp)) as checkpointer:
        checkpointer.save(os.path.abspath(directory), args=ocp.args.PyTreeSave(arrays))


def save_async(directory: str, arrays: dict[str, Any], api: str) -> Callable[[], None]:
    """Copies ``arrays`` to host memory and starts writing them in orbax's background thread.

    Returns:
      A function that waits until the files are written (raising the
      writer's error, if any).
    """
    ocp = _orbax(api)
    checkpointer = ocp.AsyncCheckpointer(_handler(ocp))
    try:
        checkpointer.save(os.path.abspath(directory), args=ocp.args.PyTreeSave(arrays))
    except BaseException:
        checkpointer.close()
        raise

    def wait() -> None:
        try:
            checkpointer.wait_until_finished()
        finally:
            checkpointer.close()

    return wait


def load(directory: str, targets: dict[str, Any], api: str) -> dict[str, Any]:
    """Reads the arrays named in ``targets``.

    Args:
      directory: a folder written by `save`.
      targets: name -> ``jax.ShapeDtypeStruct`` with a sharding (read as a
        ``jax.Array`` on it) or a NumPy array (read as NumPy).
      api: the public call, for messages.
    """
    if not targets:
        return {}
    ocp = _orbax(api)

    def restore_args(t: Any) -> Any:
        if isinstance(t, jax.ShapeDtypeStruct):
            return ocp.ArrayRestoreArgs(sharding=t.sharding, global_shape=t.shape, dtype=t.dtype)
        return ocp.RestoreArgs(restore_type=np.ndarray, dtype=t.dtype)

    args = {k: restore_args(t) for k, t in targets.items()}
    try:
        with ocp.Checkpointer(ocp.PyTreeCheckpointHandler()) as checkpointer:
            got = dict(checkpointer.restore(
                os.path.abspath(directory), args=ocp.args.PyTreeRestore(dict(targets), restore_args=args, partial_restore=True)))
    except (ValueError, KeyError, TypeError, OSError, RuntimeError, IndexError) as e:
        raise DataLossError(
            f"{api}: the array data in {directory} does not match the checkpoint's manifest or is "
            f"unreadable ({type(e).__name__}: {str(e)[:500]}); nothing was restored.",
            filename=directory,
        ) from None
    absent = sorted(k for k in targets if k not in got or got[k] is targets[k]
                    or isinstance(got[k], jax.ShapeDtypeStruct))
    if absent:
        raise DataLossError(
            f"{api}: the array data in {directory} lacks {', '.join(absent[:10])} that the "
            "manifest names; nothing was restored.", filename=directory)
    for name, value in got.items():
        want = targets[name]
        if tuple(np.shape(value)) != tuple(want.shape) or np.dtype(value.dtype) != np.dtype(want.dtype):
            raise DataLossError(
                f"{api}: the array data in {directory} does not match the checkpoint's manifest: "
                f"{name} is stored with shape {tuple(np.shape(value))} and dtype {value.dtype}, but "
                f"the manifest says {tuple(want.shape)} and {want.dtype}; nothing was restored.",
                filename=directory)
    return got
