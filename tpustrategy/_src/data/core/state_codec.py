"""Element values inside iterator checkpoints, as plain JSON.

Most iterator states are counters and upstream states. A few transformations
must keep values that cannot be re-read from the input at a bounded cost:
``scan``'s carried state, ``unique``'s seen set, the open windows of
``group_by_window``. `encode` turns such a value (a nest of NumPy arrays,
NumPy scalars, ``bytes`` and Python numbers) into JSON-able lists and dicts
that `decode` turns back into the same value: dtype, shape and bytes exact.

Tuples, namedtuples and dicts keep their kind; a namedtuple is rebuilt from its
module and qualified name (a plain tuple if that class cannot be imported); a
module path of ``data`` from before its subpackages is mapped to the path now.
"""

from __future__ import annotations

import base64
import importlib
from typing import Any

import numpy as np

from tpustrategy._src.data.core.module_paths import current_module
from tpustrategy._src.data.core.structure import OBJECT, is_namedtuple


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"))


def encode(value: Any) -> Any:
    """A JSON-able form of ``value`` (see the module docstring)."""
    if isinstance(value, bytes):
        return {"y": _b64(bytes(value))}
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        return {"p": value}
    if isinstance(value, np.generic):
        arr = np.asarray(value)
        return {"g": arr.dtype.str, "b": _b64(arr.tobytes())}
    if isinstance(value, np.ndarray):
        if value.dtype == OBJECT:
            return {"o": list(value.shape), "v": [_b64(bytes(v)) for v in value.reshape(-1).tolist()]}
        return {"a": value.dtype.str, "s": list(value.shape), "b": _b64(np.ascontiguousarray(value).tobytes())}
    if isinstance(value, tuple):
        out: dict[str, Any] = {"t": [encode(v) for v in value]}
        if is_namedtuple(value):
            cls = type(value)
            out["n"] = f"{cls.__module__}:{cls.__qualname__}"
        return out
    if isinstance(value, dict):
        return {"d": [[k, encode(v)] for k, v in value.items()]}
    if isinstance(value, list):
        return {"l": [encode(v) for v in value]}
    raise TypeError(
        f"iterator checkpoint: cannot store a value of type {type(value).__name__} ({value!r}).\n"
        "Fix: keep the state of scan / group_by_window functions to NumPy arrays, numbers, bytes "
        "and tuples/dicts of these."
    )


def _namedtuple_class(name: str) -> Any:
    module, _, qualname = name.partition(":")
    try:
        obj: Any = importlib.import_module(current_module(module))
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return obj


def decode(data: Any) -> Any:
    """The value `encode` described."""
    if "y" in data:
        return _unb64(data["y"])
    if "p" in data:
        return data["p"]
    if "g" in data:
        return np.frombuffer(_unb64(data["b"]), dtype=np.dtype(data["g"]))[0]
    if "a" in data:
        arr = np.frombuffer(_unb64(data["b"]), dtype=np.dtype(data["a"])).reshape(data["s"])
        return arr.copy()
    if "o" in data:
        out = np.empty(tuple(data["o"]), dtype=OBJECT)
        out.reshape(-1)[:] = [_unb64(v) for v in data["v"]]
        return out
    if "t" in data:
        items = [decode(v) for v in data["t"]]
        cls = _namedtuple_class(data["n"]) if "n" in data else None
        return cls(*items) if cls is not None else tuple(items)
    if "d" in data:
        return {k: decode(v) for k, v in data["d"]}
    if "l" in data:
        return [decode(v) for v in data["l"]]
    raise ValueError(f"set_state: not an encoded value: {data!r}.")
