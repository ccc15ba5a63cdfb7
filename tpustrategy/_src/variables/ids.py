"""Variable ids: one counter shared by new variables and their copies."""

from __future__ import annotations

import itertools

_counter = itertools.count()


def next_id() -> int:
    """The next unused variable id (unique in this process)."""
    return next(_counter)
