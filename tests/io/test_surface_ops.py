"""tps.io's small ops against TensorFlow 2.21's recorded results (tools/make_surface_io_fixtures.py)."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tpustrategy._src.not_provided import NotProvidedError

CASES = json.loads((pathlib.Path(__file__).parent / "fixtures" / "surface_ops.json").read_text())


def sparse_of(d: dict) -> tps.sparse.SparseTensor:
    if d["dtype"] == "string":
        values = np.empty(len(d["values"]), object)
        values[:] = [v.encode("latin-1") for v in d["values"]]
    else:
        values = np.array(d["values"], dtype=d["dtype"])
    shape = np.array(d["dense_shape"], np.int64)
    indices = np.array(d["indices"], np.int64).reshape(-1, shape.size)
    return tps.sparse.SparseTensor(indices, values, shape)


def assert_sparse_equal(got, want: dict) -> None:
    assert isinstance(got, tps.sparse.SparseTensor)
    exp = sparse_of(want)
    np.testing.assert_array_equal(got.indices, exp.indices)
    assert got.indices.dtype == np.int64 and got.dense_shape.dtype == np.int64
    assert got.values.dtype == exp.values.dtype
    assert got.values.tolist() == exp.values.tolist()
    np.testing.assert_array_equal(got.dense_shape, exp.dense_shape)


@pytest.mark.parametrize("text, expected", CASES["is_jpeg"])
def test_is_jpeg_matches_tensorflow(text, expected):
    got = tps.io.is_jpeg(text.encode("latin-1"))
    assert got is np.True_ or got is np.False_
    assert bool(got) == expected
    assert tps.image.is_jpeg is tps.io.is_jpeg


def test_is_jpeg_on_an_array_keeps_its_shape():
    contents = np.array([[b"\xff\xd8\xffx", b"\xff\xd8"], [b"", b"\xff\xd8\xff"]], object)
    np.testing.assert_array_equal(tps.io.is_jpeg(contents), [[True, False], [False, True]])


@pytest.mark.parametrize("case", CASES["serialize_sparse"], ids=lambda c: c["sparse"]["dtype"])
def test_serialize_sparse_is_tensorflows_bytes(case):
    got = tps.io.serialize_sparse(sparse_of(case["sparse"]))
    assert got.shape == (3,) and got.dtype == object
    assert [b.hex() for b in got] == case["serialized"]
    back = tps.io.deserialize_many_sparse(got[None], case["sparse"]["dtype"])
    assert back.dense_shape.tolist() == [1] + case["sparse"]["dense_shape"]


@pytest.mark.parametrize("case", CASES["serialize_many_sparse"], ids=lambda c: c["sparse"]["dtype"])
def test_serialize_many_sparse_round_trips_tensorflows_bytes(case):
    st = sparse_of(case["sparse"])
    got = tps.io.serialize_many_sparse(st)
    assert got.shape == (st.dense_shape[0], 3)
    assert [[b.hex() for b in row] for row in got] == case["serialized"]
    assert_sparse_equal(tps.io.deserialize_many_sparse(got, case["sparse"]["dtype"]), case["sparse"])


@pytest.mark.parametrize("case", CASES["deserialize_many_sparse"], ids=lambda c: c["name"])
def test_deserialize_many_sparse_matches_tensorflow(case):
    ser = np.array([[bytes.fromhex(h) for h in row] for row in case["serialized"]], object)
    if "error" in case:
        kind, message = case["error"]
        tf_text = message.split("}} ", 1)[1].split(" [Op:", 1)[0]
        with pytest.raises(getattr(tps.errors, kind)) as info:
            tps.io.deserialize_many_sparse(ser, case["dtype"], rank=case["rank"])
        assert str(info.value).startswith(tf_text)
    else:
        assert_sparse_equal(tps.io.deserialize_many_sparse(ser, case["dtype"], rank=case["rank"]), case["result"])


def test_serialize_errors_name_the_problem():
    with pytest.raises(tps.errors.InvalidArgumentError, match="Rank of input SparseTensor should be > 1, but saw rank: 1"):
        tps.io.serialize_many_sparse(tps.sparse.SparseTensor([[1]], [1], [3]))
    unsorted = tps.sparse.SparseTensor(np.array([[2, 0], [0, 1]], np.int64), np.array([1, 2], np.int32), [3, 2])
    with pytest.raises(tps.errors.InvalidArgumentError, match=r"indices\[1\] = \[0,1\] is out of order"):
        tps.io.serialize_many_sparse(unsorted)
    with pytest.raises(tps.errors.InvalidArgumentError, match="at least 1 serialized tensor"):
        tps.io.deserialize_many_sparse(np.zeros((0, 3), object), np.int32)
    with pytest.raises(ValueError, match="rank=3"):
        tps.io.deserialize_many_sparse(tps.io.serialize_many_sparse(sparse_of(CASES["serialize_many_sparse"][0]["sparse"])),
                                       np.int32, rank=3)
    with pytest.raises(TypeError, match="out_type"):
        tps.io.serialize_sparse(tps.sparse.SparseTensor([[0]], [1], [2]), out_type="variant")


def test_match_filenames_once_is_the_sorted_matches(tmp_path):
    for name in ("b.txt", "c.txt", "a.txt", "d.csv"):
        (tmp_path / name).write_bytes(b"")
    got = tps.io.match_filenames_once(str(tmp_path / "*.txt"))
    assert got.dtype == object
    assert [pathlib.Path(p.decode()).name for p in got] == CASES["match_filenames_once"]["basenames"]


def test_registered_schemes_are_the_ones_gfile_opens(tmp_path):
    schemes = tps.io.gfile.get_registered_schemes()
    assert set(schemes) <= set(CASES["registered_schemes"])  # a subset of TensorFlow's
    (tmp_path / "f").write_bytes(b"x")
    for scheme in schemes:
        assert tps.io.gfile.exists(f"{scheme}://{tmp_path}/f" if scheme else str(tmp_path / "f"))
    for scheme in set(CASES["registered_schemes"]) - set(schemes):
        with pytest.raises(tps.errors.UnimplementedError):
            tps.io.gfile.exists(f"{scheme}://bucket/f")


@pytest.mark.parametrize("name", ["FixedLenFeature", "VarLenFeature", "parse_example", "parse_single_example",
                                  "TFRecordWriter", "FixedLenSequenceFeature", "SparseFeature", "RaggedFeature",
                                  "parse_sequence_example", "parse_single_sequence_example"])
def test_parsing_and_writing_are_tpsd_s(name):
    assert getattr(tps.io, name) is getattr(tpsd, name)


@pytest.mark.parametrize("name", ["decode_webp", "decode_jxl", "decode_proto", "encode_proto", "write_graph",
                                  "TFRecordOptions"])
def test_placeholders_raise_naming_the_tensorflow_name(name):
    with pytest.raises(NotProvidedError, match=rf"tf\.io\.{name} has no counterpart"):
        getattr(tps.io, name)()
