"""XLA flags tpustrategy sets, each only when the installed jaxlib knows it.

XLA aborts the process at start-up on a flag it does not know, so a flag that a
newer jaxlib renames or removes would kill every job. Whether this jaxlib knows a
flag is read off jaxlib itself rather than from a version table: XLA registers
each flag under its name as a NUL-terminated C string, which lies in jaxlib's
shared libraries exactly when the flag exists. When the name is not there the
flag is not set and the caller's default applies (for the collective timeout:
XLA's own, so a stuck peer is still named by the health monitor, only later).

Public alternative: none; XLA flags are read from ``XLA_FLAGS`` when the backend
starts, and no API lists them. ``tests/jax_shims`` starts a backend with each flag
this module would set, so a flag whose name stays in the binary while XLA stops
accepting it fails loudly there.
"""

from __future__ import annotations

import functools
import glob
import mmap
import os

COLLECTIVE_TIMEOUT = "--xla_cpu_collective_timeout_seconds"


def _libraries() -> list[str]:
    """jaxlib's shared libraries, the largest (XLA itself) first."""
    import jaxlib

    found = glob.glob(os.path.join(os.path.dirname(jaxlib.__file__), "**", "*.so*"), recursive=True)
    return sorted(found, key=lambda path: -os.path.getsize(path))


@functools.cache
def jaxlib_knows(flag: str) -> bool:
    """Whether the installed jaxlib registers the XLA flag ``flag`` (``--name`` or ``name``).

    Reads jaxlib's shared libraries (memory-mapped; about 0.1 s for the whole of
    XLA, once per flag and process) for the flag's name as a C string.
    """
    needle = flag.lstrip("-").split("=", 1)[0].encode() + b"\0"
    for path in _libraries():
        try:
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                if m.find(needle) >= 0:
                    return True
        except (OSError, ValueError):  # unreadable or empty: not where the flag is
            continue
    return False


def accepts_collective_timeout() -> bool:
    """Whether the installed jaxlib accepts ``COLLECTIVE_TIMEOUT``."""
    return jaxlib_knows(COLLECTIVE_TIMEOUT)


def set_collective_timeout(seconds: int | None) -> bool:
    """Adds ``COLLECTIVE_TIMEOUT=seconds`` to ``XLA_FLAGS`` (before the backend starts).

    Does nothing when ``seconds`` is None, when ``XLA_FLAGS`` already sets the
    flag (the user's value wins), or when this jaxlib does not know the flag.

    Returns:
      Whether the flag was added.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if seconds is None or COLLECTIVE_TIMEOUT in flags or not accepts_collective_timeout():
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {COLLECTIVE_TIMEOUT}={int(seconds)}".strip()
    return True
