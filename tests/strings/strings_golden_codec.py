"""Reads the cases recorded by tools/make_strings_fixtures.py and compares our results with them.

The encoding is the tool's (see its docstring): inputs decode to our forms
(``bytes``, object arrays of ``bytes``, `RaggedRows`, `SparseTensor`) and our
results encode to the recorded form, so a case compares whole values.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import numpy as np

from tpustrategy._src.sparse.tensor import SparseTensor
from tpustrategy._src.strings.ragged import RaggedRows, from_rows


def load(path: pathlib.Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    assert data["_tf_version"].startswith("2.21"), data["_tf_version"]
    return data["cases"]


def _latin(text: str) -> bytes:
    return text.encode("latin-1")


def _ragged_bytes(obj: Any, dtype: str) -> Any:
    if isinstance(obj, list):
        return [_ragged_bytes(o, dtype) for o in obj]
    return _latin(obj) if dtype == "string" else obj


def decode(value: Any) -> Any:
    """A recorded argument in our form."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "bytes" in value:
        return _latin(value["bytes"])
    if "array" in value:
        if value["dtype"] == "string":
            out = np.empty(len(value["array"]), dtype=object)
            out[:] = [_latin(v) for v in value["array"]]
            return out.reshape(value["shape"])
        return np.array(value["array"], dtype=value["dtype"]).reshape(value["shape"])
    if "ragged" in value:
        rows = _ragged_bytes(value["ragged"], value["dtype"])
        dtype = object if value["dtype"] == "string" else value["dtype"]
        return from_rows(rows, (len(rows),), dtype)
    if "sparse" in value:
        s = value["sparse"]
        return SparseTensor(decode(s["indices"]), decode(s["values"]), decode(s["dense_shape"]))
    if "list" in value:
        return [decode(v) for v in value["list"]]
    if "dtype" in value:
        return np.dtype(value["dtype"])
    raise AssertionError(f"unknown encoding {value!r}")


def _plain(obj: Any) -> Any:
    if isinstance(obj, list):
        return [_plain(o) for o in obj]
    if isinstance(obj, bytes):
        return obj.decode("latin-1")
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def encode(value: Any) -> Any:
    """Our result in the recorded form."""
    if isinstance(value, RaggedRows):
        dtype = "string" if value.values.dtype == object else value.values.dtype.name
        return {"ragged": _plain(value.to_list()), "dtype": dtype}
    if isinstance(value, SparseTensor):
        return {"sparse": {"indices": encode(value.indices), "values": encode(value.values),
                           "dense_shape": encode(value.dense_shape)}}
    if isinstance(value, bytes):
        return {"array": [value.decode("latin-1")], "dtype": "string", "shape": []}
    if isinstance(value, (np.generic, np.ndarray)):
        arr = np.asarray(value)
        if arr.dtype == object:
            return {"array": [v.decode("latin-1") for v in arr.reshape(-1).tolist()], "dtype": "string",
                    "shape": list(arr.shape)}
        return {"array": arr.reshape(-1).tolist(), "dtype": arr.dtype.name, "shape": list(arr.shape)}
    if isinstance(value, (list, tuple)):
        return {"list": [encode(v) for v in value]}
    raise AssertionError(f"cannot encode {type(value).__name__}")


def assert_same(ours: Any, recorded: Any, where: str) -> None:
    """Equal values; floats to float32 rounding, NaN equal to NaN."""
    if isinstance(recorded, dict) and "array" in recorded and recorded["dtype"].startswith("float"):
        assert isinstance(ours, dict) and "array" in ours, f"{where}: ours {ours!r} vs TensorFlow's {recorded!r}"
        assert ours["dtype"] == recorded["dtype"] and ours["shape"] == recorded["shape"], (where, ours, recorded)
        np.testing.assert_allclose(np.array(ours["array"], float), np.array(recorded["array"], float),
                                   rtol=1e-6, equal_nan=True, err_msg=where)
        return
    if isinstance(recorded, dict) and isinstance(ours, dict) and recorded.keys() == ours.keys():
        for k in recorded:
            assert_same(ours[k], recorded[k], f"{where}.{k}")
        return
    if isinstance(recorded, list) and isinstance(ours, list) and len(recorded) == len(ours):
        for i, (o, r) in enumerate(zip(ours, recorded)):
            assert_same(o, r, f"{where}[{i}]")
        return
    assert ours == recorded, f"{where}: ours {ours!r} vs TensorFlow's {recorded!r}"


def run_case(module: Any, case: dict[str, Any]) -> None:
    """Calls our op with the case's inputs and checks TensorFlow's result or error."""
    import pytest

    fn = getattr(module, case["op"])
    args = [decode(a) for a in case["args"]]
    kwargs = {k: decode(v) for k, v in case["kwargs"].items()}
    if "error" in case:
        expected = case["error"]
        with pytest.raises(Exception) as info:
            fn(*args, **kwargs)
        names = {c.__name__ for c in type(info.value).__mro__}
        assert expected["error"] in names, f"{case['name']}: raised {info.value!r}, TensorFlow raised {expected}"
        assert str(info.value).startswith(expected["message"].rstrip()), (
            f"{case['name']}: message {str(info.value)!r} does not start with TensorFlow's {expected['message']!r}")
        return
    assert_same(encode(fn(*args, **kwargs)), case["result"], case["name"])
