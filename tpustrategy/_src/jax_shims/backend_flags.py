"""XLA flags tpustrategy sets, each only on the jaxlib versions known to accept it.

XLA aborts the process at start-up on a flag it does not know, so a flag that a
newer jaxlib renames or removes would kill every job. Each flag here lists the
half-open jaxlib version range on which it was checked (``tests/jax_shims`` runs
a process with it); outside that range it is not set and the caller's default
applies (for the collective timeout: XLA's own, so a stuck peer is still named by
the health monitor, only later).

Public alternative: none; XLA flags are read from ``XLA_FLAGS`` when the backend starts.
"""

from __future__ import annotations

import os

COLLECTIVE_TIMEOUT = "--xla_cpu_collective_timeout_seconds"
# jaxlib versions on which COLLECTIVE_TIMEOUT was run: [low, high).
COLLECTIVE_TIMEOUT_RANGE = ((0, 10, 2), (0, 11, 0))


def jaxlib_version() -> tuple[int, ...]:
    """The installed jaxlib version as a tuple of ints (``(0, 10, 2)``)."""
    import jaxlib

    parts = []
    for part in jaxlib.__version__.split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def accepts_collective_timeout(version: tuple[int, ...] | None = None) -> bool:
    """Whether ``COLLECTIVE_TIMEOUT`` is known to exist in jaxlib ``version`` (default: installed)."""
    low, high = COLLECTIVE_TIMEOUT_RANGE
    version = jaxlib_version() if version is None else tuple(version)
    return low <= version < high


def set_collective_timeout(seconds: int | None) -> bool:
    """Adds ``COLLECTIVE_TIMEOUT=seconds`` to ``XLA_FLAGS`` (before the backend starts).

    Does nothing when ``seconds`` is None, when ``XLA_FLAGS`` already sets the
    flag (the user's value wins), or when this jaxlib is outside the known range.

    Returns:
      Whether the flag was added.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if seconds is None or COLLECTIVE_TIMEOUT in flags or not accepts_collective_timeout():
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {COLLECTIVE_TIMEOUT}={int(seconds)}".strip()
    return True
