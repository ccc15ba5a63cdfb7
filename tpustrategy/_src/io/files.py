"""Whole-file reads and writes and glob matching (``tf.io.read_file`` / ``write_file`` /
``matching_files``), on local paths and ``file://`` URLs."""

from __future__ import annotations

import glob as _glob
import os
from typing import Any

import numpy as np

from tpustrategy._src.io._tensors import string_array, to_bytes
from tpustrategy._src.io.gfile import GFile, local_path


def read_file(filename: Any, name: str | None = None) -> bytes:
    """The whole contents of a file as ``bytes`` (``tf.io.read_file``).

    Raises:
      tps.errors.NotFoundError: the file does not exist (TensorFlow's error type).
    """
    del name
    with GFile(_one_path(filename, "read_file"), "rb") as f:
        return f.read()


def write_file(filename: Any, contents: Any, name: str | None = None) -> None:
    """Writes ``contents`` to ``filename``, creating parent directories (``tf.io.write_file``)."""
    del name
    path = local_path(_one_path(filename, "write_file"))
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "wb") as f:
        f.write(to_bytes(contents) if not isinstance(contents, np.ndarray) else contents[()])


def matching_files(pattern: Any, name: str | None = None) -> np.ndarray:
    """The sorted files matching one or more glob patterns (``tf.io.matching_files``).

    Returns:
      A 1-D object array of ``bytes`` paths (empty when nothing matches).
    """
    del name
    patterns = string_array(pattern, api="tps.io.matching_files", arg="pattern").reshape(-1)
    found: list[bytes] = []
    for p in patterns:
        text = p.decode()
        prefix = "file://" if text.startswith("file://") else ""
        found.extend((prefix + m).encode() for m in _glob.glob(local_path(text)))
    out = np.empty(len(found), object)
    out[:] = sorted(found)
    return out


def _one_path(filename: Any, api: str) -> str:
    arr = string_array(filename, api=f"tps.io.{api}", arg="filename")
    if arr.ndim != 0:
        raise ValueError(f"tps.io.{api}: filename must be a scalar string, received shape "
                         f"{arr.shape}.")
    return arr[()].decode()




def match_filenames_once(pattern: Any, name: str | None = None) -> np.ndarray:
    """The sorted files matching ``pattern``, computed once (``tf.io.match_filenames_once``).

    TensorFlow 2 runs eagerly: its result is a non-trainable string variable initialised, at
    the call, with ``tf.io.matching_files(pattern)``. Here it is that value, a 1-D object
    array of ``bytes`` paths (no variable: the input pipeline has none).
    """
    del name
    return matching_files(pattern)
