"""Array data on disk through ``orbax-checkpoint`` (an optional dependency).

One flat dict ``{"a0": array, "a1": ...}`` per checkpoint, written and read
with orbax's PyTree handler: a sharded ``jax.Array`` is written shard by
shard, each replicated shard once (by the process that holds replica 0 of
it), NumPy arrays by the primary process only; reading places every array
on the sharding of its target, so a value saved on 8 devices restores onto 4.
Orbax is imported only when a checkpoint holds arrays, with an install hint
when it is missing.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

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


def save(directory: str, arrays: dict[str, Any], api: str) -> None:
    """Writes ``arrays`` (``jax.Array`` or NumPy) into the new folder ``directory``."""
    ocp = _orbax(api)
    with ocp.Checkpointer(ocp.PyTreeCheckpointHandler()) as checkpointer:
        checkpointer.save(directory, args=ocp.args.PyTreeSave(arrays))


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
    with ocp.Checkpointer(ocp.PyTreeCheckpointHandler()) as checkpointer:
        return dict(checkpointer.restore(
            directory, args=ocp.args.PyTreeRestore(dict(targets), restore_args=args, partial_restore=True)))
