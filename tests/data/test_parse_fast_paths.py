"""The vectorised Example parsers (`_batch_scan`) against protobuf's record-by-record parse.

Every fast path -- record by record in Python (`_parse_each`), all records at
once (`_parse_joined`: layout templates, or the field-by-field walk when
templates are off), one record of ``parse_single_example`` (`_batch_walk.parse_record`
with a cached plan) -- must give exactly what the protobuf path gives, or step
aside so that the protobuf path runs and raises its error.
"""

from __future__ import annotations

import base64
import json
import os
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpustrategy._src.data.core.string_scalar import StringScalar
from tpustrategy._src.data.parsing import _batch_scan, _batch_templates
from tpustrategy._src.data.parsing.example import (
    FixedLenFeature,
    VarLenFeature,
    _check_features,
    _one,
    _parse_records,
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
)
from tpustrategy._src.data.parsing.wire import read_packed_varints, varint

MANIFEST = json.load(
    open(os.path.join(os.path.dirname(__file__), "fixtures", "manifest.json"), encoding="utf-8")
)


@contextmanager
def _no_templates():
    saved = _batch_templates.MAX_TEMPLATES
    _batch_templates.MAX_TEMPLATES = 0
    try:
        yield
    finally:
        _batch_templates.MAX_TEMPLATES = saved


def _each(batch, specs):
    return _batch_scan._parse_each(batch, specs, len(batch))


def _joined(batch, specs):
    return _batch_scan._parse_joined(batch, specs, len(batch))


def _walked(batch, specs):
    with _no_templates():
        return _batch_scan._parse_joined(batch, specs, len(batch))


PATHS = {"each": _each, "templates": _joined, "walk": _walked}


def _reference(batch, specs):
    try:
        return _parse_records("parse_example", batch, specs), None
    except ValueError as e:
        return None, str(e)


def _assert_same(got, want):
    assert list(got) == list(want)
    for key in want:
        g, w = got[key], want[key]
        if isinstance(w, tuple):
            assert isinstance(g, tuple) and len(g) == 2
            _assert_array(g[0], w[0])
            _assert_array(g[1], w[1])
        else:
            _assert_array(g, w)


def _assert_array(g, w):
    assert isinstance(g, np.ndarray)
    assert g.dtype == w.dtype and g.shape == w.shape
    if w.dtype == object:
        assert all(type(v) is bytes for v in g.reshape(-1))
        assert g.tolist() == w.tolist()
    else:
        np.testing.assert_array_equal(g, w)
        # bit-exact floats (NaN payloads, -0.0)
        assert g.tobytes() == np.ascontiguousarray(w).tobytes()


def _check_all_paths(batch, specs, *, must_take=("each", "templates", "walk")):
    """Every path equals protobuf's result, or returns None (and then protobuf raises or not)."""
    specs = _check_features("parse_example", specs)
    want, error = _reference(batch, specs)
    for name, path in PATHS.items():
        try:
            got = path(batch, specs)
        except _batch_scan._STEP_ASIDE:
            got = None
        if error is not None:
            assert got is None, f"{name} parsed a batch protobuf rejects: {error}"
            continue
        if got is None:
            assert name not in must_take, f"{name} stepped aside on a plain batch"
            continue
        _assert_same(got, want)
    for record in dict.fromkeys(batch):
        _check_single(record, specs)
    # The public entry point agrees too (whichever path it takes).
    if error is None:
        _assert_same(parse_example(batch, specs), want)
    else:
        with pytest.raises(ValueError) as info:
            parse_example(batch, specs)
        assert str(info.value) == error
    return want, error


def _check_single(record, specs):
    """``parse_single_example`` (its one-record fast path, or the general one) equals protobuf's
    parse of that record without the batch axis, or raises protobuf's error."""
    try:
        want = {k: _one(v) for k, v in _parse_records("parse_single_example", [record], specs).items()}
        error = None
    except ValueError as e:
        want, error = None, str(e)
    for given_as in (record, StringScalar(record)):  # a map function gets a StringScalar
        if error is not None:
            with pytest.raises(ValueError) as info:
                parse_single_example(given_as, specs)
            assert str(info.value) == error
            continue
        got = parse_single_example(given_as, specs)
        assert list(got) == list(want)
        for key, w in want.items():
            if isinstance(w, bytes):
                assert type(got[key]) is bytes and got[key] == w
            else:
                _assert_array(got[key], w)


# ---------------------------------------------------------------- random Examples

_KEYS = ["a", "b", "image", "ключ", "é", "x" * 130]  # unicode keys; a key longer than 127 bytes
_INT64S = st.one_of(
    st.integers(-(2**63), 2**63 - 1),  # negative: 10-byte varints
    st.integers(0, 127),
    st.integers(128, 2**21),  # 2 and 3 bytes
)
_FLOATS = st.floats(width=32, allow_nan=True, allow_infinity=True)
_BYTES = st.one_of(st.binary(max_size=40), st.text(max_size=8).map(str.encode))


def _feature(kind, values):
    if kind == "string":
        return Feature(bytes_list=BytesList(value=values))
    if kind == "float32":
        return Feature(float_list=FloatList(value=values))
    if kind == "int64":
        return Feature(int64_list=Int64List(value=values))
    return Feature()  # no kind: counts as missing


_VALUES = {"string": _BYTES, "float32": _FLOATS, "int64": _INT64S}


@st.composite
def _batches(draw, fixed_size=False):
    kinds = draw(st.dictionaries(st.sampled_from(_KEYS), st.sampled_from(list(_VALUES)),
                                 min_size=1, max_size=4))
    sizes = {k: draw(st.integers(0, 3)) for k in kinds}
    rows = draw(st.integers(1, 12))
    batch = []
    for _ in range(rows):
        feats = {}
        for key, kind in kinds.items():
            if draw(st.integers(0, 9)) == 0:
                continue  # missing
            if draw(st.integers(0, 19)) == 0:
                feats[key] = Feature()  # present without a kind
                continue
            size = sizes[key] if fixed_size else draw(st.integers(0, 5))
            feats[key] = _feature(kind, draw(st.lists(_VALUES[kind], min_size=size, max_size=size)))
        if draw(st.booleans()):
            feats["unrequested"] = _feature("int64", draw(st.lists(_INT64S, max_size=3)))
        ex = Example(features=Features(feature=feats))
        batch.append(ex.SerializeToString(deterministic=draw(st.booleans())))
    specs = {}
    for key, kind in kinds.items():
        if fixed_size and draw(st.booleans()):
            default = None
            if draw(st.booleans()):
                default = draw(st.lists(_VALUES[kind], min_size=sizes[key], max_size=sizes[key]))
                if kind == "float32":
                    default = [0.5] * sizes[key]
            shape = [] if sizes[key] == 1 and draw(st.booleans()) else [sizes[key]]  # a scalar
            specs[key] = FixedLenFeature(shape, kind, default_value=default)
        else:
            specs[key] = VarLenFeature(kind)
    return batch, specs


@settings(max_examples=300, deadline=None)
@given(_batches())
def test_random_var_len_batches_parse_as_protobuf_does(case):
    batch, specs = case
    _check_all_paths(batch, specs)


@settings(max_examples=300, deadline=None)
@given(_batches(fixed_size=True))
def test_random_fixed_len_batches_with_missing_features_and_defaults(case):
    batch, specs = case
    _check_all_paths(batch, specs, must_take=())


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_requesting_a_kind_other_than_the_stored_one_steps_aside_for_the_error(data):
    kind = data.draw(st.sampled_from(list(_VALUES)))
    other = data.draw(st.sampled_from([k for k in _VALUES if k != kind]))
    rows = data.draw(st.integers(1, 10))
    bad = data.draw(st.integers(0, rows - 1))
    batch = []
    for i in range(rows):
        stored = other if i == bad else kind
        values = data.draw(st.lists(_VALUES[stored], min_size=1, max_size=2))
        batch.append(Example(features=Features(feature={"f": _feature(stored, values)}))
                     .SerializeToString())
    want, error = _check_all_paths(batch, {"f": VarLenFeature(kind)}, must_take=())
    assert want is None and f"feature 'f' of example {bad} is stored as" in error


@settings(max_examples=100, deadline=None)
@given(_batches(), st.data())
def test_truncated_records_step_aside_or_agree(case, data):
    batch, specs = case
    i = data.draw(st.integers(0, len(batch) - 1))
    cut = data.draw(st.integers(0, max(len(batch[i]) - 1, 0)))
    batch = [*batch[:i], batch[i][:cut], *batch[i + 1 :]]
    _check_all_paths(batch, specs, must_take=())


def test_batches_of_one_layout_take_a_single_template():
    rng = np.random.default_rng(0)
    batch = [
        Example(features=Features(feature={
            "image": _feature("string", [rng.bytes(3072)]),
            "label": _feature("int64", [int(rng.integers(0, 1000))]),
        })).SerializeToString()
        for _ in range(64)
    ]
    specs = {"image": FixedLenFeature([], "string"), "label": FixedLenFeature([], "int64")}
    want, _ = _check_all_paths(batch, specs)
    assert want["image"].shape == (64,) and want["label"].dtype == np.int64
    # Labels below 128 take one byte, others two: two layouts, both from the cache next time.
    _batch_templates._TEMPLATES.clear()
    _joined(batch, _check_features("x", specs))
    assert len(_batch_templates._TEMPLATES) == 2


def test_a_cached_layout_is_not_used_for_records_it_does_not_match():
    specs = _check_features("x", {"k": VarLenFeature("int64")})

    def ser(feats):
        return Example(features=Features(feature=feats)).SerializeToString()

    # Same length, same requested key, different structure around it.
    one = [ser({"k": _feature("int64", [5]), "zz": _feature("string", [b"abc"])})] * 8
    two = [ser({"zz": _feature("string", [b"abc"]), "k": _feature("int64", [7])})] * 8
    assert len(one[0]) == len(two[0])
    assert _joined(one, specs)["k"][0].tolist() == [5] * 8
    assert _joined(two, specs)["k"][0].tolist() == [7] * 8
    mixed = one[:4] + two[:4]
    np.testing.assert_array_equal(_joined(mixed, specs)["k"][0], [5] * 4 + [7] * 4)


# ------------------------------------------------------------ hand-made wire forms


def _ld(field: int, payload: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def _entry(key: bytes, feature: bytes | None, *, value_first=False) -> bytes:
    parts = [_ld(1, key)] + ([] if feature is None else [_ld(2, feature)])
    return _ld(1, b"".join(reversed(parts) if value_first else parts))


def _record(*entries: bytes, extra: bytes = b"") -> bytes:
    return _ld(1, b"".join(entries)) + extra


def _int_list(payload: bytes) -> bytes:
    return _ld(3, payload)


def _f32(*values) -> bytes:
    return np.asarray(values, "<f4").tobytes()


UNUSUAL = {
    # Int64List values written one field each (unpacked), and in two packed runs.
    "unpacked int64": _record(_entry(b"f", _int_list(varint(1 << 3) + varint(5)
                                                     + varint(1 << 3) + varint(2**40)))),
    "two packed runs": _record(_entry(b"f", _int_list(_ld(1, varint(1) + varint(300))
                                                      + _ld(1, varint(-1))))),
    "unpacked floats": _record(_entry(b"g", _ld(2, varint(1 << 3 | 5) + _f32(1.5)
                                                + varint(1 << 3 | 5) + _f32(-2.0)))),
    "unknown field in Example": _record(_entry(b"f", _int_list(_ld(1, varint(3)))),
                                        extra=varint(7 << 3) + varint(9)),
    "features field twice (merged)": _record(_entry(b"f", _int_list(_ld(1, varint(1)))))
    + _record(_entry(b"g", _ld(2, _ld(1, _f32(2.5))))),
    "key twice (the last wins)": _record(_entry(b"f", _int_list(_ld(1, varint(1)))),
                                         _entry(b"f", _int_list(_ld(1, varint(2))))),
    "value before key": _record(_entry(b"f", _int_list(_ld(1, varint(4))), value_first=True)),
    "entry without a value": _record(_entry(b"f", None)),
    "Feature with two kinds (the last wins)": _record(
        _entry(b"f", _ld(2, _ld(1, _f32(1.0))) + _int_list(_ld(1, varint(8))))),
    "empty packed run": _record(_entry(b"f", _int_list(_ld(1, b"")))),
    "10-byte varints": _record(_entry(b"f", _int_list(_ld(1, varint(-5) + varint(-(2**63)))))),
    "unknown field in a list": _record(_entry(b"f", _int_list(_ld(1, varint(6))
                                                              + varint(2 << 3) + varint(1)))),
    "empty record": b"",
}

INVALID = {
    "11-byte varint": _record(_entry(b"f", _int_list(_ld(1, b"\xff" * 10 + b"\x01")))),
    "key not UTF-8": _record(_entry(b"\xff\xfe", _int_list(_ld(1, varint(1))))),
    "packed run ends inside a varint": _record(_entry(b"f", _int_list(_ld(1, b"\x80")))),
    "float run not a multiple of 4": _record(_entry(b"g", _ld(2, _ld(1, b"\x00\x00\x80")))),
    "length past the end": _record(_entry(b"f", _int_list(_ld(1, varint(1)))))[:-1],
    "wire type 7": b"\x0f\x00",
}

_UNUSUAL_SPECS = {"f": VarLenFeature("int64"), "g": VarLenFeature("float32")}


@pytest.mark.parametrize("name", sorted(UNUSUAL))
def test_unusual_wire_forms_parse_as_protobuf_does(name):
    plain = _record(_entry(b"f", _int_list(_ld(1, varint(11)))), _entry(b"g", _ld(2, _ld(1, _f32(0.25)))))
    for batch in ([UNUSUAL[name]], [plain] * 4 + [UNUSUAL[name]] + [plain] * 4):
        want, error = _check_all_paths(batch, _UNUSUAL_SPECS, must_take=())
        assert error is None


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_records_step_aside_so_protobuf_raises(name):
    plain = _record(_entry(b"f", _int_list(_ld(1, varint(11)))))
    for batch in ([INVALID[name]], [plain] * 8 + [INVALID[name]]):
        want, error = _check_all_paths(batch, _UNUSUAL_SPECS, must_take=())
        assert want is None and "is not a valid serialized tf.train.Example" in error


def test_the_protobuf_reading_of_the_unusual_forms():
    # Independent expectations for a few of them (protobuf's merge rules).
    out = parse_example([UNUSUAL["key twice (the last wins)"]], _UNUSUAL_SPECS)
    assert out["f"][0].tolist() == [2]
    out = parse_example([UNUSUAL["two packed runs"]] * 9, _UNUSUAL_SPECS)
    assert out["f"][0].tolist() == [1, 300, -1] * 9 and out["f"][1].tolist() == [3] * 9
    out = parse_example([UNUSUAL["10-byte varints"]] * 9, _UNUSUAL_SPECS)
    assert out["f"][0].tolist() == [-5, -(2**63)] * 9


def test_read_packed_varints_decodes_every_width():
    values = [0, 1, 127, 128, 300, 2**21, 2**35 + 7, 2**56 - 1, 2**56, 2**63 - 1, -1, -(2**63), -300]
    data = np.frombuffer(b"".join(varint(v) for v in values), np.uint8)
    got, last = read_packed_varints(data)
    assert got.view(np.int64).tolist() == values
    assert last.tolist() == np.cumsum([len(varint(v)) for v in values]).__sub__(1).tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40))
def test_read_packed_varints_matches_the_wire_format_for_any_int64s(values):
    data = np.frombuffer(b"".join(varint(v) for v in values), np.uint8)
    got, last = read_packed_varints(data)
    assert got.view(np.int64).tolist() == values
    assert last.tolist() == (np.cumsum([len(varint(v)) for v in values], dtype=np.int64) - 1).tolist()


# ---------------------------------------------------------------- TensorFlow's bytes


def test_tensorflows_serialized_examples_parse_on_every_path():
    kind = {"float": "float32", "int64": "int64", "bytes": "string"}
    for case in MANIFEST["examples"]:
        record = base64.b64decode(case["tf_serialized"])
        specs = {k: VarLenFeature(kind[v["kind"]]) for k, v in case["features"].items()}
        for batch in ([record], [record] * 9):
            want, error = _check_all_paths(batch, specs)
            assert error is None
            for key, values in case["tf_parsed_varlen"].items():
                if case["features"][key]["kind"] == "bytes":
                    expect = [base64.b64decode(v) for v in values] * len(batch)
                    assert want[key][0].tolist() == expect
                else:
                    np.testing.assert_array_equal(
                        want[key][0], np.asarray(values * len(batch), dtype=specs[key].dtype))


def test_tensorflows_parse_example_batch_on_every_path():
    info = MANIFEST["parse_example_batch"]
    batch = [base64.b64decode(b) for b in info["serialized"]]
    specs = {"x": FixedLenFeature([2, 2], "float32"),
             "label": FixedLenFeature([], "int64", default_value=-1)}
    want, error = _check_all_paths(batch, specs)
    assert error is None
    np.testing.assert_array_equal(want["x"], np.asarray(info["x"], dtype=np.float32))
    np.testing.assert_array_equal(want["label"], info["label"])


# ---------------------------------------------------------------- parse_single_example's plans


def test_single_example_plans_follow_each_spec_not_equal_looking_ones():
    record = Example(features=Features(feature={"b": _feature("int64", [4])})).SerializeToString()
    # Equal as dataclasses (default_value does not take part in ==), different defaults.
    first = {"a": FixedLenFeature([], "int64", default_value=7), "b": FixedLenFeature([], "int64")}
    second = {"a": FixedLenFeature([], "int64", default_value=9), "b": FixedLenFeature([], "int64")}
    assert first["a"] == second["a"]
    for _ in range(2):  # the second round reads the cached plans
        assert parse_single_example(record, first)["a"] == 7
        assert parse_single_example(record, second)["a"] == 9
    # The same dict changed between calls: the new spec is read.
    first["a"] = FixedLenFeature([2], "float32", default_value=[0.5, 1.5])
    np.testing.assert_array_equal(parse_single_example(record, first)["a"], [0.5, 1.5])
    first["c"] = VarLenFeature("string")
    out = parse_single_example(record, first)
    assert list(out) == ["a", "b", "c"] and out["c"].dtype == object and out["c"].shape == (0,)
    # A missing required feature and a kind mismatch still raise protobuf's errors.
    with pytest.raises(ValueError, match="'a'"):
        parse_single_example(record, {"a": FixedLenFeature([], "int64")})
    with pytest.raises(ValueError, match="b"):
        parse_single_example(record, {"b": FixedLenFeature([], "float32")})


def test_single_example_scalar_strings_and_shapes():
    record = Example(features=Features(feature={
        "s": _feature("string", [b"abc"]), "ss": _feature("string", [b"x", b"yz"]),
        "f": _feature("float32", [1.0, 2.0, 3.0, 4.0]), "i": _feature("int64", [-3])})).SerializeToString()
    out = parse_single_example(record, {
        "s": FixedLenFeature([], "string"), "ss": FixedLenFeature([2], "string"),
        "f": FixedLenFeature([2, 2], "float32"), "i": FixedLenFeature([], "int64"),
        "d": FixedLenFeature([], "string", default_value="dflt")})
    assert type(out["s"]) is bytes and out["s"] == b"abc"
    assert out["ss"].dtype == object and out["ss"].tolist() == [b"x", b"yz"]
    assert out["f"].dtype == np.float32 and out["f"].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert out["i"].shape == () and out["i"].dtype == np.int64 and int(out["i"]) == -3
    assert type(out["d"]) is bytes and out["d"] == b"dflt"


# --------------------------------------------------------------------------- the repeated-field walk


def _field(payload: bytes, tag: int = 0x0A) -> bytes:
    from tpustrategy._src.data.parsing.wire import varint

    return bytes([tag]) + varint(len(payload)) + payload


def _reference_fields(msgs: list[bytes]) -> list[tuple[int, bytes]]:
    """(message, field payload) of every field 1 of each message, walked byte by byte."""
    out = []
    for m, data in enumerate(msgs):
        pos = 0
        while pos < len(data):
            assert data[pos] == 0x0A
            length, shift, p = 0, 0, pos + 1
            while True:
                b = data[p]
                length |= (b & 0x7F) << shift
                shift, p = shift + 7, p + 1
                if b < 0x80:
                    break
            out.append((m, data[p : p + length]))
            pos = p + length
    return out


def _walk(msgs: list[bytes], max_steps=None):
    joined = b"".join([*msgs, _batch_scan._PAD])
    buf = np.frombuffer(joined, np.uint8)
    lens = np.array([len(m) for m in msgs], np.int64)
    ends = np.cumsum(lens)
    got = _batch_scan._repeated_field(buf, ends - lens, ends, max_steps)
    if got is None or got is _batch_scan.TOO_MANY_STEPS:
        return got
    msg, vs, ve = got
    return [(int(m), joined[s:e]) for m, s, e in zip(msg, vs, ve)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.binary(max_size=300), max_size=12), min_size=1, max_size=20))
def test_the_repeated_field_walk_finds_every_field_in_order(payloads):
    msgs = [b"".join(_field(p) for p in fields) for fields in payloads]
    assert _walk(msgs) == _reference_fields(msgs)


def test_the_repeated_field_walk_steps_aside_bails_and_stops_as_it_should():
    ok = [_field(b"ab") * 3, b"", _field(b"x" * 200) + _field(b"")]
    assert _walk(ok) == _reference_fields(ok)  # a two-byte length among one-byte ones
    assert _walk([_field(b"ab"), _field(b"cd", tag=0x12)]) is None  # another field: scan_fields reads it
    with pytest.raises(_batch_scan._Bail):  # a field longer than what is left of its message
        _walk([_field(b"abc")[:-1], _field(b"z")])
    assert _walk([_field(b"a") * 5, _field(b"b")], max_steps=4) is _batch_scan.TOO_MANY_STEPS
    assert _walk([_field(b"a") * 4, _field(b"b")], max_steps=4) == _reference_fields([_field(b"a") * 4, _field(b"b")])


def test_the_repeated_field_walk_bails_at_an_absurd_length():
    """A length that would send the walk backwards (a varint of 2**64 - 1 or 2**63, negative as a
    position) makes it bail (the general path reports the record), never loop or read elsewhere."""
    for absurd in (b"\xff" * 9 + b"\x01", b"\x80" * 9 + b"\x01"):
        with pytest.raises(_batch_scan._Bail):
            _walk([_field(b"y" * 130), b"\x0a" + absurd + b"rest"])
    fine = [_field(b"y" * 130), _field(b"\xff" * 140) + _field(b"z"), _field(b"")]
    assert _walk(fine) == _reference_fields(fine)
