"""The vectorised walk of a batch of serialized SequenceExamples (see :mod:`.sequence_example`)."""

from __future__ import annotations

from typing import Any

import numpy as np


def walk(batch: list[bytes], keys: dict[str, np.dtype]) -> tuple[list[bytes], dict[str, Any]] | None:
    """Each record's context as Example bytes and the feature lists of ``keys``, or None (protobuf's turn)."""
    return None
