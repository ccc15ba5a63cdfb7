"""What the processes of a job agree on while saving or restoring a checkpoint.

A checkpoint is a collective act: every process calls ``save``/``restore`` at
the same point of its program (SPMD), the processes check that they agree on
the checkpoint number and the path, and they wait for each other at the
points where one process's files must be complete before another reads or
commits them. Barriers and all-gathers come from
``jax.experimental.multihost_utils``; with one process they cost nothing.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def process_index() -> int:
    return int(jax.process_index())


def process_count() -> int:
    return int(jax.process_count())


def barrier(name: str) -> None:
    """Waits until every process of the job reached the barrier ``name``."""
    from tpustrategy._src.replica import across_processes

    across_processes.barrier(f"tps.checkpoint:{name}")


def allgather(values: Any) -> np.ndarray:
    """``[num_processes, ...]``: every process's int64 ``values``."""
    values = np.asarray(values, np.int64)
    if process_count() == 1:
        return values[None]
    from tpustrategy._src.replica import across_processes

    return np.asarray(across_processes.allgather(values))


def agree(api: str, what: str, value: int) -> int:
    """Returns ``value`` after checking that every process passed the same one.

    Raises:
      ValueError: naming each process's value, when they differ.
    """
    gathered = allgather([value])[:, 0].tolist()
    if len(set(gathered)) > 1:
        listing = ", ".join(f"process {i}: {v}" for i, v in enumerate(gathered))
        raise ValueError(
            f"{api}: the processes of this job disagree on {what} ({listing}); a checkpoint "
            "is written by every process at the same step.\nFix: call it at the same point of "
            "the training loop on every process, with the same arguments (e.g. "
            "checkpoint_number=step, where step advances identically everywhere)."
        )
    return value


def text_fingerprint(text: str) -> int:
    """A 63-bit fingerprint of ``text`` (to compare paths across processes)."""
    import google_crc32c

    data = text.encode()
    return (google_crc32c.value(data) << 31) ^ google_crc32c.value(data[::-1])


def sync(api: str, stage: str, error: BaseException | None) -> None:
    """A barrier that also tells every process whether any of them failed at ``stage``.

    Raises:
      error: this process's own error, if any.
      RuntimeError: another process failed (so no process goes on alone).
    """
    if process_count() == 1:
        if error is not None:
            raise error
        return
    flags = allgather([int(error is not None)])[:, 0].tolist()
    if error is not None:
        raise error
    failed = [i for i, f in enumerate(flags) if f]
    if failed:
        raise RuntimeError(
            f"{api}: process(es) {', '.join(map(str, failed))} failed while {stage}; their own "
            "error says why. Nothing was committed or changed on this process.\nFix: see the "
            "failing process's log."
        )


def broadcast_text(text: str) -> str:
    """Process 0's ``text`` on every process (e.g. the chief's checkpoint path)."""
    if process_count() == 1:
        return text
    data = list(text.encode("utf-8", errors="surrogateescape"))
    longest = int(allgather([len(data)])[:, 0].max())
    padded = data + [-1] * (longest - len(data))
    first = allgather(padded)[0].tolist()
    return bytes(b for b in first if b >= 0).decode("utf-8", errors="surrogateescape")
