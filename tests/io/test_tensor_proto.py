"""tps.io.serialize_tensor / parse_tensor against TensorFlow 2.21's TensorProto bytes
(tests/io/fixtures/manifest.json "tensors" and proto_cases.json, from tools/make_io_fixtures.py)."""

from __future__ import annotations

import json
import pathlib

import ml_dtypes
import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.errors import InvalidArgumentError

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())["tensors"]
OUTPUTS = np.load(FIXTURES / "outputs.npz")
PROTO = json.loads((FIXTURES / "proto_cases.json").read_text(encoding="utf-8"))
# The two string tensors of the manifest, as tools/make_io_fixtures.py made them.
STRINGS = {"string_vec": np.array([b"a", b"", b"\x00bc"], object), "string_scalar": b"hello"}


def _manifest_value(name):
    return STRINGS[name] if name in STRINGS else OUTPUTS[f"tensor/{name}"]


@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: e["name"])
def test_serialize_gives_tensorflows_bytes_for_17_dtypes(entry):
    value = _manifest_value(entry["name"])
    assert tps.io.serialize_tensor(value) == bytes.fromhex(entry["serialized_hex"])


@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: e["name"])
def test_parse_reads_tensorflows_bytes_back(entry):
    out = tps.io.parse_tensor(bytes.fromhex(entry["serialized_hex"]), entry["dtype"])
    want = _manifest_value(entry["name"])
    if entry["dtype"] == "string":
        assert np.asarray(out, object).tolist() == np.asarray(want, object).tolist()
        assert isinstance(out, bytes) == (entry["shape"] == [])
        return
    assert out.dtype == want.dtype and list(out.shape) == entry["shape"]
    np.testing.assert_array_equal(out, want)


def _input(spec):
    if isinstance(spec, dict) and "bfloat16" in spec:
        return np.array(spec["bfloat16"], ml_dtypes.bfloat16)
    if isinstance(spec, dict) and spec["np"] == "object_hex":
        out = np.empty(len(spec["value"]), object)
        out[:] = [bytes.fromhex(v) for v in spec["value"]]
        return out.reshape(spec["shape"])
    if isinstance(spec, dict):
        return np.array(spec["value"], spec["np"]).reshape(spec["shape"])
    return spec


@pytest.mark.parametrize("entry", PROTO["serialize"], ids=lambda e: e["name"])
def test_serialize_types_python_values_like_tf_constant(entry):
    data = tps.io.serialize_tensor(_input(entry["input"]))
    assert data == bytes.fromhex(entry["serialized_hex"])
    back = tps.io.parse_tensor(data, entry["dtype"])
    assert list(np.shape(back)) == entry["shape"]
    assert tps.io.serialize_tensor(back) == data  # round trip


def _values(ref):
    if ref["dtype"] == "string":
        return np.array([bytes.fromhex(v) for v in ref["values"]], object).reshape(ref["shape"])
    if ref["dtype"].startswith("complex"):
        return np.array([complex(*v) for v in ref["values"]], ref["dtype"]).reshape(ref["shape"])
    return np.array(ref["values"], ref["dtype"]).reshape(ref["shape"])


@pytest.mark.parametrize("entry", PROTO["parse_typed"], ids=lambda e: e["name"])
def test_parse_reads_typed_value_fields_and_fills_with_the_last_value(entry):
    out = tps.io.parse_tensor(bytes.fromhex(entry["serialized_hex"]), entry["out_type"])
    want = _values(entry["output"])
    if entry["out_type"] == "string":
        assert out == want[()]
        return
    if entry["out_type"] == "bfloat16":  # recorded as float32
        assert out.dtype == ml_dtypes.bfloat16
        out = out.astype(np.float32)
    assert out.dtype == want.dtype and out.shape == want.shape
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("entry", PROTO["parse_errors"], ids=lambda e: e["name"])
def test_parse_errors_are_tensorflows(entry):
    with pytest.raises(InvalidArgumentError) as info:
        tps.io.parse_tensor(bytes.fromhex(entry["serialized_hex"]), entry["out_type"])
    ours = str(info.value).split("\n")[0]
    if entry["name"] == "content_size_wrong":  # TF appends a debug dump of the proto
        assert ours.startswith("Cannot parse tensor from proto: ")
        assert entry["error"]["message"].startswith("Cannot parse tensor from proto: ")
        return
    assert ours == entry["error"]["message"]
    assert "tps.io.parse_tensor" in str(info.value)


def test_out_type_accepts_dtype_objects_and_names():
    data = tps.io.serialize_tensor(np.arange(3, dtype=np.int16))
    for out_type in (np.int16, "int16", np.dtype("int16")):
        np.testing.assert_array_equal(tps.io.parse_tensor(data, out_type), [0, 1, 2])


def test_unsupported_dtype_is_named_with_a_fix():
    with pytest.raises(TypeError, match=r"(?s)float8_e4m3fn.*astype"):
        tps.io.serialize_tensor(np.zeros(2, ml_dtypes.float8_e4m3fn))


def test_big_endian_input_is_written_little_endian():
    value = np.array([1, 2], dtype=">i4")
    assert tps.io.serialize_tensor(value) == tps.io.serialize_tensor(value.astype("<i4"))


def test_a_batch_of_serialized_tensors_is_refused_with_a_fix():
    data = tps.io.serialize_tensor(np.float32(1))
    with pytest.raises(InvalidArgumentError) as info:
        tps.io.parse_tensor(np.array([data, data], object), np.float32)
    first, fix = str(info.value).split("\n", 1)
    assert first == "Expected `serialized` to be a scalar, got shape: [2]"  # TensorFlow's text
    assert "map the op" in fix
