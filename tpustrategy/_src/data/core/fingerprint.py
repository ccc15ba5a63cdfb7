"""`Dataset.fingerprint`: a uint64 hash of a pipeline's structure.

TensorFlow hashes the dataset graph; here the hash covers every node's type,
its parameters (arrays by dtype, shape and bytes; functions by module,
qualified name and bytecode) and its inputs, in order. Two pipelines built
by the same code get the same fingerprint in every process; element values
are never read.
"""

from __future__ import annotations

import hashlib
import types
from typing import Any

import numpy as np

from tpustrategy._src.data.core.module_paths import stable_module


def _feed(h: Any, value: Any, depth: int = 0) -> None:
    from tpustrategy._src.data.core.dataset import Dataset

    if depth > 20:
        h.update(b"<deep>")
        return
    if isinstance(value, Dataset):
        _feed_node(h, value, depth + 1)
    elif isinstance(value, np.ndarray):
        h.update(f"nd{value.dtype}{value.shape}".encode())
        h.update(repr(value.tolist()).encode() if value.dtype == object else value.tobytes())
    elif isinstance(value, (types.FunctionType, types.MethodType)):
        fn = value.__func__ if isinstance(value, types.MethodType) else value
        h.update(f"fn{stable_module(fn.__module__)}.{fn.__qualname__}".encode())
        h.update(fn.__code__.co_code)
        h.update(repr(fn.__code__.co_consts).encode(errors="replace"))
    elif isinstance(value, (list, tuple)):
        h.update(f"seq{type(value).__name__}{len(value)}".encode())
        for v in value:
            _feed(h, v, depth + 1)
    elif isinstance(value, dict):
        h.update(f"dict{len(value)}".encode())
        for k in sorted(value, key=repr):
            h.update(repr(k).encode())
            _feed(h, value[k], depth + 1)
    elif value is None or isinstance(value, (bool, int, float, str, bytes, np.generic, np.dtype)):
        h.update(f"{type(value).__name__}:{value!r}".encode())
    else:
        h.update(f"obj{stable_module(type(value).__module__)}.{type(value).__qualname__}".encode())


def _feed_node(h: Any, node: Any, depth: int) -> None:
    h.update(f"node{stable_module(type(node).__module__)}.{type(node).__qualname__}".encode())
    for name in type(node)._params:
        h.update(name.encode())
        _feed(h, getattr(node, name, None), depth)
    for name in ("fn", "predicate"):
        if hasattr(node, name):
            _feed(h, getattr(node, name), depth)
    for inp in node.inputs:
        _feed_node(h, inp, depth + 1)


def fingerprint(dataset: Any) -> np.uint64:
    """The uint64 fingerprint of ``dataset``'s graph."""
    h = hashlib.blake2b(digest_size=8)
    _feed_node(h, dataset, 0)
    return np.uint64(int.from_bytes(h.digest(), "little"))
