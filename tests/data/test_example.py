"""Tests of the Example protos and parse_example / parse_single_example."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpustrategy._src.data.parsing import _example_layout
from tpustrategy._src.data.parsing.example import (
    FixedLenFeature,
    VarLenFeature,
    parse_example,
    parse_single_example,
)
from tpustrategy._src.data.parsing.example_proto import (
    BytesList,
    Example,
    Feature,
    Features,
    FloatList,
    Int64List,
    bytes_feature,
    float_feature,
    int64_feature,
    make_example,
)


def _ser(features: dict) -> bytes:
    return make_example(features).SerializeToString(deterministic=True)


def test_message_full_names_and_field_numbers_are_those_of_tf_train():
    assert Example.DESCRIPTOR.full_name == "tensorflow.Example"
    assert Example.DESCRIPTOR.fields_by_name["features"].number == 1
    feature = Feature.DESCRIPTOR
    assert [(f.name, f.number) for f in feature.fields] == [
        ("bytes_list", 1),
        ("float_list", 2),
        ("int64_list", 3),
    ]
    assert feature.oneofs_by_name["kind"].fields == list(feature.fields)
    assert Features.DESCRIPTOR.fields_by_name["feature"].message_type.GetOptions().map_entry
    assert FloatList.DESCRIPTOR.fields_by_name["value"].is_packed
    assert Int64List.DESCRIPTOR.fields_by_name["value"].is_packed
    assert BytesList.DESCRIPTOR.fields_by_name["value"].number == 1


def test_an_example_serializes_to_the_hand_encoded_wire_bytes():
    ex = Example(features=Features(feature={"a": Feature(int64_list=Int64List(value=[1, 300]))}))
    # Example{1: Features{1: entry{1: "a", 2: Feature{3: Int64List{1: packed [1, 300]}}}}}
    int64_list = b"\x0a\x03\x01\xac\x02"
    feat = b"\x1a" + bytes([len(int64_list)]) + int64_list
    entry = b"\x0a\x01a\x12" + bytes([len(feat)]) + feat
    features = b"\x0a" + bytes([len(entry)]) + entry
    assert ex.SerializeToString() == b"\x0a" + bytes([len(features)]) + features


def test_make_example_infers_the_list_kind_from_values():
    ex = make_example(
        {
            "f": np.arange(3, dtype=np.float64),
            "i": 3,
            "b": True,
            "s": "héllo",
            "raw": b"\x00",
            "strs": [b"a", "b"],
            "ints": np.array([[1, 2], [3, 4]]),
            "given": float_feature([]),
        }
    )
    fm = ex.features.feature
    assert list(fm["f"].float_list.value) == [0.0, 1.0, 2.0]
    assert list(fm["i"].int64_list.value) == [3] and list(fm["b"].int64_list.value) == [1]
    assert list(fm["s"].bytes_list.value) == ["héllo".encode()]
    assert list(fm["raw"].bytes_list.value) == [b"\x00"]
    assert list(fm["strs"].bytes_list.value) == [b"a", b"b"]
    assert list(fm["ints"].int64_list.value) == [1, 2, 3, 4]
    assert fm["given"].WhichOneof("kind") == "float_list"


def test_make_example_rejects_an_empty_list_whose_kind_is_unknown():
    with pytest.raises(ValueError, match=r"feature 'e' is an empty list(?s:.*)bytes_feature"):
        make_example({"e": []})
    assert (
        make_example({"e": np.array([], np.int64)}).features.feature["e"].WhichOneof("kind")
        == "int64_list"
    )


def test_make_example_rejects_values_of_no_kind():
    with pytest.raises(TypeError, match="feature 'c' has a value of type complex"):
        make_example({"c": 1j})


def test_feature_helpers_build_each_kind():
    assert list(bytes_feature(["a", b"b"]).bytes_list.value) == [b"a", b"b"]
    assert list(int64_feature(np.int32(5)).int64_list.value) == [5]
    assert list(float_feature(0.5).float_list.value) == [0.5]


# --------------------------------------------------------------------------- specs


@pytest.mark.parametrize(
    "dtype, name",
    [
        ("int64", "int64"),
        (np.int64, "int64"),
        (np.dtype("float32"), "float32"),
        ("float32", "float32"),
        ("string", "object"),
        (bytes, "object"),
        (object, "object"),
        (str, "object"),
    ],
)
def test_feature_specs_accept_the_dtype_spellings(dtype, name):
    assert FixedLenFeature([], dtype).dtype == np.dtype(name)
    assert VarLenFeature(dtype).dtype == np.dtype(name)


def test_an_unsupported_dtype_names_the_three_kinds():
    with pytest.raises(ValueError, match=r"dtype must be int64, float32 or string.*float64"):
        FixedLenFeature([], np.float64)


def test_a_bad_shape_and_a_bad_default_are_rejected():
    with pytest.raises(ValueError, match=r"shape must be a list of non-negative ints.*\[None\]"):
        FixedLenFeature([None], "float32")
    with pytest.raises(ValueError, match=r"default_value has 3 values but shape \[2, 2\] needs 4"):
        FixedLenFeature([2, 2], "float32", default_value=[1, 2, 3])


def test_feature_specs_are_frozen_and_hashable():
    spec = FixedLenFeature([3], "int64")
    with pytest.raises(AttributeError):
        spec.shape = (4,)
    assert spec == FixedLenFeature((3,), np.int64) and hash(spec) == hash(
        FixedLenFeature([3], "int64")
    )


# --------------------------------------------------------------------------- parsing

_SPECS = {"x": FixedLenFeature([64], "float32"), "label": FixedLenFeature([], "int64")}


def _batch(n=32, seed=0):
    rng = np.random.default_rng(seed)
    xs = rng.random((n, 64)).astype(np.float32)
    labels = rng.integers(0, 10, n)
    return (
        xs,
        labels,
        [_ser({"x": xs[i], "label": int(labels[i]), "id": f"{i:04d}"}) for i in range(n)],
    )


def test_parse_example_gives_batch_arrays_of_the_right_shapes_and_values():
    xs, labels, batch = _batch()
    out = parse_example(batch, _SPECS)
    assert list(out) == ["x", "label"]
    assert out["x"].dtype == np.float32 and out["x"].shape == (32, 64)
    np.testing.assert_array_equal(out["x"], xs)
    np.testing.assert_array_equal(out["label"], labels)
    assert out["label"].dtype == np.int64 and out["label"].shape == (32,)


def test_parse_example_accepts_an_object_array_batch_and_an_empty_batch():
    _, labels, batch = _batch(5)
    arr = np.empty(5, dtype=object)
    arr[:] = batch
    np.testing.assert_array_equal(parse_example(arr, _SPECS)["label"], labels)
    out = parse_example([], {"x": FixedLenFeature([2], "float32"), "v": VarLenFeature("int64")})
    assert out["x"].shape == (0, 2) and out["v"][0].shape == (0,) and out["v"][1].shape == (0,)


def test_parse_single_example_gives_the_feature_shape_and_a_0d_array_for_scalars():
    xs, labels, batch = _batch(3)
    out = parse_single_example(batch[1], {**_SPECS, "id": FixedLenFeature([], "string")})
    assert out["x"].shape == (64,) and out["label"].shape == () and int(out["label"]) == labels[1]
    assert isinstance(out["label"], np.ndarray)
    # A scalar string is bytes (README: strings are bytes).
    assert type(out["id"]) is bytes and out["id"] == b"0001"


def test_var_len_features_give_values_and_row_lengths_for_a_batch():
    batch = [_ser({"v": np.array([1, 2, 3])}), _ser({"other": 1}), _ser({"v": [-7]})]
    values, lengths = parse_example(batch, {"v": VarLenFeature("int64")})["v"]
    np.testing.assert_array_equal(values, [1, 2, 3, -7])
    np.testing.assert_array_equal(lengths, [3, 0, 1])
    assert values.dtype == np.int64 and lengths.dtype == np.int64
    one = parse_single_example(batch[0], {"v": VarLenFeature(np.int64)})["v"]
    np.testing.assert_array_equal(one, [1, 2, 3])


def test_string_features_are_object_arrays_of_bytes():
    batch = [_ser({"s": [b"a\x00", "é"]}), _ser({"s": [b"", b"z"]})]
    out = parse_example(batch, {"s": FixedLenFeature([2], "string"), "v": VarLenFeature("string")})
    assert out["s"].dtype == object and out["s"].tolist() == [[b"a\x00", "é".encode()], [b"", b"z"]]
    assert out["v"][0].tolist() == [] and out["v"][1].tolist() == [0, 0]


def test_defaults_fill_missing_features_reshaped_or_broadcast():
    batch = [_ser({"a": 1}), _ser({"a": 2, "m": [5.0, 6.0, 7.0, 8.0]})]
    out = parse_example(
        batch,
        {
            "m": FixedLenFeature([2, 2], "float32", default_value=[1, 2, 3, 4]),
            "b": FixedLenFeature([3], "int64", default_value=-1),
            "s": FixedLenFeature([], "string", default_value="none"),
        },
    )
    np.testing.assert_array_equal(out["m"], [[[1, 2], [3, 4]], [[5, 6], [7, 8]]])
    np.testing.assert_array_equal(out["b"], [[-1, -1, -1]] * 2)
    assert out["s"].tolist() == [b"none", b"none"]


def test_a_feature_with_no_kind_counts_as_missing_as_in_tensorflow():
    empty = Example(features=Features(feature={"x": Feature()})).SerializeToString()
    assert (
        parse_single_example(empty, {"x": FixedLenFeature([], "float32", default_value=5)})["x"]
        == 5
    )
    assert parse_single_example(empty, {"x": VarLenFeature("float32")})["x"].shape == (0,)


def test_a_missing_required_feature_names_the_key_and_the_example_index():
    _, _, batch = _batch(3)
    batch[2] = _ser({"x": np.zeros(64, np.float32)})
    with pytest.raises(ValueError, match=r"required feature 'label' .* is missing from example 2"):
        parse_example(batch, _SPECS)


def test_a_kind_mismatch_names_the_key_the_stored_kind_and_the_requested_dtype():
    batch = [_ser({"label": 1.5})]
    with pytest.raises(
        ValueError,
        match=r"feature 'label' of example 0 is stored as float_list but was requested as int64",
    ):
        parse_example(batch, {"label": FixedLenFeature([], "int64")})
    with pytest.raises(ValueError, match="stored as int64_list but was requested as string"):
        parse_single_example(_ser({"v": 1}), {"v": VarLenFeature("string")})


def test_a_wrong_value_count_names_the_key_the_count_and_the_shape():
    batch = [_ser({"x": np.zeros(3, np.float32)})] * 4
    with pytest.raises(
        ValueError,
        match=r"feature 'x' of example 0 has 3 values, but FixedLenFeature shape \[2, 2\] needs exactly 4",
    ):
        parse_example(batch, {"x": FixedLenFeature([2, 2], "float32")})


def test_bytes_that_are_not_an_example_raise_value_error_naming_the_index():
    with pytest.raises(
        ValueError, match=r"serialized\[1\] is not a valid serialized tf.train.Example"
    ):
        parse_example([_ser({"a": 1}), b"\xff\xff\xff"], {"a": VarLenFeature("int64")})


def test_wrong_argument_types_name_the_function_and_the_fix():
    with pytest.raises(TypeError, match="parse_example: serialized must be a batch"):
        parse_example(b"abc", _SPECS)
    with pytest.raises(
        TypeError, match="parse_single_example: serialized must be one bytes object"
    ):
        parse_single_example([b"abc"], _SPECS)
    with pytest.raises(
        TypeError, match=r"features\['x'\] must be a FixedLenFeature or VarLenFeature"
    ):
        parse_example([], {"x": "float32"})


def test_the_uniform_layout_path_is_taken_for_fixed_size_numeric_batches():
    _, _, batch = _batch(16)
    specs = {"x": _SPECS["x"], "label": _SPECS["label"]}
    assert _example_layout.parse_uniform_batch(batch, specs) is not None
    # A batch whose labels need different varint widths falls back to protobuf.
    other = batch[:2] + [_ser({"x": np.zeros(64, np.float32), "label": 1000, "id": "0002"})]
    assert _example_layout.parse_uniform_batch(other, specs) is None
    assert parse_example(other, _SPECS)["label"][2] == 1000


_VALUE = {
    "float32": st.lists(st.floats(width=32, allow_nan=False), max_size=4),
    "int64": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4),
}


@settings(max_examples=150, deadline=None)
@given(
    kinds=st.dictionaries(
        st.sampled_from(["a", "b", "ключ"]), st.sampled_from(["float32", "int64"]), min_size=1
    ),
    data=st.data(),
)
def test_the_uniform_layout_path_and_protobuf_agree_on_random_batches(kinds, data):
    rows = data.draw(st.integers(1, 5))
    batch = []
    for _ in range(rows):
        feats = {}
        for key, kind in kinds.items():
            values = data.draw(_VALUE[kind])
            feats[key] = float_feature(values) if kind == "float32" else int64_feature(values)
        batch.append(_ser(feats))
    specs = {key: VarLenFeature(kind) for key, kind in kinds.items()}
    fast = _example_layout.parse_uniform_batch(batch, specs)
    slow = {}
    for key, spec in specs.items():
        values, lengths = [], []
        for b in batch:
            stored = Example.FromString(b).features.feature[key]
            vals = list(getattr(stored, stored.WhichOneof("kind") or "float_list").value)
            values += vals
            lengths.append(len(vals))
        slow[key] = (np.asarray(values, dtype=spec.dtype), np.asarray(lengths))
    full = parse_example(batch, specs)
    for key in specs:
        np.testing.assert_array_equal(full[key][0], slow[key][0])
        np.testing.assert_array_equal(full[key][1], slow[key][1])
        if fast is not None:
            np.testing.assert_array_equal(fast[key][0], slow[key][0])
            np.testing.assert_array_equal(fast[key][1], slow[key][1])
