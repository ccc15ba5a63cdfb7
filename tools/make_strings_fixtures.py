"""Records TensorFlow 2.21's results of ``tf.strings`` and ``tf.sparse`` ops for the tests.

Run with TensorFlow installed (it is used by this script only, never by the
library or its tests)::

    /work/tfvenv/bin/python tools/make_strings_fixtures.py

Writes ``tests/strings/fixtures/signatures.json`` (every function's parameters:
names, kinds, defaults), ``tests/strings/fixtures/strings_cases.json`` and
``tests/sparse/fixtures/sparse_cases.json``: a list of cases, each
``{"name", "op", "args", "kwargs", "result" | "error"}``. Values are encoded as

- ``{"bytes": latin-1 text}`` a string scalar;
- ``{"array": flat list, "dtype": name, "shape": [...]}`` a tensor (strings as latin-1 text);
- ``{"ragged": nested list, "dtype": name}`` a ``tf.RaggedTensor`` (``to_list()``);
- ``{"sparse": {"indices", "values", "dense_shape"}}`` a ``tf.SparseTensor``;
- ``{"error": exception class name, "message": text}`` where TensorFlow raised.

The tests (``tests/strings/test_strings_golden.py``, ``tests/sparse/test_sparse_golden.py``)
decode the inputs, call ``tps.strings.<op>`` / ``tps.sparse.<op>`` with them and
compare with the recorded result.
"""

from __future__ import annotations

import json
import os
import random
import sys

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
STRINGS_OUT = os.path.join(HERE, "..", "tests", "strings", "fixtures", "strings_cases.json")
SPARSE_OUT = os.path.join(HERE, "..", "tests", "sparse", "fixtures", "sparse_cases.json")


def _text(b: bytes) -> str:
    return b.decode("latin-1")


def encode(value: object) -> object:
    """A JSON-able description of a Python or TensorFlow value."""
    if isinstance(value, tf.RaggedTensor):
        lst = value.to_list()
        return {"ragged": _plain(lst), "dtype": value.dtype.name}
    if isinstance(value, tf.SparseTensor):
        return {"sparse": {"indices": encode(value.indices), "values": encode(value.values),
                           "dense_shape": encode(value.dense_shape)}}
    if isinstance(value, (tf.Tensor, tf.Variable)):
        value = value.numpy()
        if isinstance(value, bytes):
            return {"array": [_text(value)], "dtype": "string", "shape": []}
    if isinstance(value, bytes):
        return {"bytes": _text(value)}
    if isinstance(value, np.ndarray):
        dtype = "string" if value.dtype.kind in "OS" else value.dtype.name
        flat = value.reshape(-1).tolist()
        if dtype == "string":
            flat = [_text(v) for v in flat]
        return {"array": flat, "dtype": dtype, "shape": list(value.shape)}
    if isinstance(value, np.generic):
        return encode(np.asarray(value))
    if isinstance(value, (list, tuple)):
        return {"list": [encode(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": {k: encode(v) for k, v in value.items()}}
    if isinstance(value, tf.dtypes.DType):
        return {"dtype": value.name}
    return value  # int, float, str, bool, None


def _plain(obj: object) -> object:
    if isinstance(obj, list):
        return [_plain(o) for o in obj]
    if isinstance(obj, bytes):
        return _text(obj)
    if isinstance(obj, (np.generic,)):
        return obj.item()
    return obj


def decode(value: object) -> object:
    """The TensorFlow-side input for an encoded argument."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if "bytes" in value:
            return value["bytes"].encode("latin-1")
        if "array" in value:
            if value["dtype"] == "string":
                flat = [v.encode("latin-1") for v in value["array"]]
                return tf.constant(np.array(flat, dtype=object).reshape(value["shape"]), dtype=tf.string)
            return tf.constant(np.array(value["array"], dtype=value["dtype"]).reshape(value["shape"]))
        if "ragged" in value:
            return tf.ragged.constant(_bytes_of(value["ragged"], value["dtype"]),
                                      dtype=tf.as_dtype(value["dtype"]))
        if "sparse" in value:
            s = value["sparse"]
            return tf.SparseTensor(decode(s["indices"]), decode(s["values"]), decode(s["dense_shape"]))
        if "list" in value:
            return [decode(v) for v in value["list"]]
        if "dict" in value:
            return {k: decode(v) for k, v in value["dict"].items()}
        if "dtype" in value:
            return tf.as_dtype(value["dtype"])
    return value


def _bytes_of(obj: object, dtype: str) -> object:
    if isinstance(obj, list):
        return [_bytes_of(o, dtype) for o in obj]
    if dtype == "string" and isinstance(obj, str):
        return obj.encode("latin-1")
    return obj


def S(*items: object, shape: list[int] | None = None) -> dict:
    """A string tensor argument (``str`` items are UTF-8 encoded)."""
    flat = [i.encode() if isinstance(i, str) else i for i in items]
    arr = np.array(flat, dtype=object).reshape(shape if shape is not None else [len(flat)])
    return encode(arr)


def A(values: object, dtype: str) -> dict:
    """A numeric tensor argument."""
    return encode(np.array(values, dtype=dtype))


def B(text: str | bytes) -> dict:
    """A string scalar argument."""
    return encode(text.encode() if isinstance(text, str) else text)


def R(rows: list, dtype: str = "string") -> dict:
    """A ragged argument."""
    def enc(o: object) -> object:
        if isinstance(o, list):
            return [enc(x) for x in o]
        if isinstance(o, str):
            return _text(o.encode())
        return o
    return {"ragged": enc(rows), "dtype": dtype}


def SP(indices: list, values: list, dense_shape: list, dtype: str) -> dict:
    """A SparseTensor argument."""
    if dtype == "string":
        vals = S(*values)
    else:
        vals = A(values, dtype)
    return {"sparse": {"indices": A(np.array(indices, dtype=np.int64).reshape(-1, len(dense_shape)), "int64"),
                       "values": vals, "dense_shape": A(dense_shape, "int64")}}


def run(module: object, cases: list[tuple]) -> list[dict]:
    out = []
    for name, op, args, kwargs in cases:
        fn = module
        for part in op.split("."):
            fn = getattr(fn, part)
        record = {"name": name, "op": op, "args": args, "kwargs": kwargs}
        try:
            result = fn(*[decode(a) for a in args], **{k: decode(v) for k, v in kwargs.items()})
            record["result"] = encode(result)
        except Exception as e:  # noqa: BLE001 - TensorFlow's error is the recorded result
            record["error"] = {"error": type(e).__name__, "message": _core_message(str(e))}
        out.append(record)
    return out


def _core_message(text: str) -> str:
    """TensorFlow's message without the eager op's decoration (``{{function_node ...}} `` and `` [Op:...]``)."""
    text = text.split("\n")[0]
    if text.startswith("{{function_node") and "}} " in text:
        text = text.split("}} ", 1)[1]
    return text.split(" [Op:", 1)[0]


def _random_strings(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out = [b"", b"a", b"b", b"c", b"d", b"hello", b"world", "ünïcödé".encode(), b"\x00\xff\x80"]
    while len(out) < n:
        length = rng.choice([1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 65, 100, 200])
        out.append(bytes(rng.randrange(256) for _ in range(length)))
    return out


def strings_cases() -> list[tuple]:
    c: list[tuple] = []
    add = lambda name, op, *args, **kwargs: c.append((name, op, list(args), kwargs))  # noqa: E731

    words = _random_strings(48, 7)
    for buckets in (1, 2, 10, 100, 1000003, 2**62):
        add(f"hash_fast_{buckets}", "to_hash_bucket_fast", S(*words), buckets)
        add(f"hash_legacy_{buckets}", "to_hash_bucket", S(*words), buckets)
    for key in ([123, 345], [98765, 132], [0, 0], [2**63 - 1, 2**40 + 5]):
        add(f"hash_strong_{key[0]}", "to_hash_bucket_strong", S(*words), 1000, key)
    add("hash_strong_bad_key", "to_hash_bucket_strong", S("a", "b"), 10, [98765])
    add("hash_fast_scalar", "to_hash_bucket_fast", B("hello"), 7)
    add("hash_fast_2d", "to_hash_bucket_fast", S("a", "b", "c", "d", shape=[2, 2]), 5)
    add("hash_fast_zero_buckets", "to_hash_bucket_fast", S("a"), 0)

    add("split_scalar_ws", "split", B("  hello   world  "))
    add("split_scalar_sep", "split", B("a,b,,c,"), ",")
    add("split_scalar_multichar_sep", "split", B("a<>b<><>c"), "<>")
    add("split_maxsplit", "split", B("a,b,c,d"), ",", 2)
    add("split_maxsplit_ws", "split", B(" a b  c d "), None, 1)
    add("split_vector", "split", S("pigs on the wing", "animals", ""))
    add("split_vector_sep", "split", S("1<>2<>3", "<><>4<>5", "<><>", ""), "<>")
    add("split_2d", "split", S("a b", "c", "", "d e f", shape=[2, 2]))
    add("split_empty_sep", "split", S("abc"), "")
    add("split_unicode_ws", "split", S("a\u00a0b\tc\nd\x0be\x0cf\rg"))

    add("join_two", "join", [S("abc", "de"), S("x", "yz")], "-")
    add("join_broadcast", "join", [S("a", "b", "c"), B("!")], "")
    add("join_scalars", "join", [B("a"), B("b")], ", ")
    add("join_shape_mismatch", "join", [S("a", "b"), S("a", "b", "c")])

    for unit in ("BYTE", "UTF8_CHAR"):
        add(f"length_{unit}", "length", S("", "h", "hello", "ünïcödé", "😀x"), unit=unit)
    add("length_bad_unit", "length", S("a"), unit="CHAR")
    add("length_2d", "length", S("a", "bb", "ccc", "", shape=[2, 2]))
    add("lower", "lower", S("Hello World", "ÀÉÎ", "MiXeD123"))
    add("lower_utf8", "lower", S("Hello World", "ÀÉÎ", "MiXeD123"), encoding="utf-8")
    add("upper", "upper", S("hello world", "àéî", "miXed123"))
    add("upper_utf8", "upper", S("hello world", "àéî", "miXed123", "straße"), encoding="utf-8")
    add("strip", "strip", S("  hello  ", "\t\n x \r\x0b\x0c", "", "   ", "\xa0a\xa0"))

    add("regex_full_match", "regex_full_match", S("abc", "abcd", "xabc", ""), "a.c")
    add("regex_full_match_alt", "regex_full_match", S("TF lib", "tf lib", "lib"), "(TF|tf) lib")
    add("regex_full_match_bad", "regex_full_match", S("a"), "(")
    add("regex_replace", "regex_replace", S("hello world", "aaa", ""), "a|o", "X")
    add("regex_replace_first", "regex_replace", S("aaa"), "a", "b", False)
    add("regex_replace_groups", "regex_replace", S("john smith", "jane doe"), r"(\w+) (\w+)", r"\2, \1")
    add("regex_replace_whole", "regex_replace", S("abc"), r"b", r"[\0]")
    add("regex_replace_empty_pattern", "regex_replace", S("abc", ""), "", "-")
    add("regex_replace_star", "regex_replace", S("abxd", "xx"), "x*", "-")
    add("regex_replace_escape", "regex_replace", S("a.b"), r"\.", r"\\")
    add("regex_replace_bad_rewrite", "regex_replace", S("abc"), "b", r"\3")
    add("regex_replace_bad_pattern", "regex_replace", S("abc"), "(", "x")
    add("regex_replace_utf8_dot", "regex_replace", S("héllo"), ".", "x")
    add("regex_replace_class", "regex_replace", S("a1b22c333"), r"\d+", "#")

    for unit in ("BYTE", "UTF8_CHAR"):
        add(f"substr_scalar_{unit}", "substr", B("Hello ünï"), 1, 5, unit=unit)
        add(f"substr_neg_{unit}", "substr", S("Hello", "World"), -3, 2, unit=unit)
        add(f"substr_vec_{unit}", "substr", S("Hello", "World", "abc"), A([1, 2, 0], "int32"), A([2, 3, 10], "int32"),
            unit=unit)
        add(f"substr_oob_{unit}", "substr", S("Hello", "World"), A([1, 6], "int32"), A([2, 1], "int32"), unit=unit)
        add(f"substr_oob_neg_{unit}", "substr", S("Hello"), -6, 1, unit=unit)
    add("substr_broadcast", "substr", S("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", shape=[2, 3]),
        A([1, 2, 3], "int32"), A([1, 2, 3], "int32"))
    add("substr_pos_at_end", "substr", S("abc"), 3, 1)
    add("substr_negative_len", "substr", S("abc"), 0, -1)
    add("substr_int64", "substr", S("abcdef"), A([2], "int64"), A([2], "int64"))

    add("to_number_float", "to_number", S("1.5", "-2", "3e2", "inf", "-inf", "nan", " 7", "1e40"))
    add("to_number_float64", "to_number", S("1.5", "0.1", "1e300"), tf.float64.name)
    add("to_number_int32", "to_number", S("1", "-2", "2147483647"), "int32")
    add("to_number_int64", "to_number", S("9223372036854775807", "-12"), "int64")
    add("to_number_int32_overflow", "to_number", S("2147483648"), "int32")
    add("to_number_bad", "to_number", S("1.5", "abc"))
    add("to_number_bad_int", "to_number", S("1.5"), "int32")
    add("to_number_empty", "to_number", S(""))
    add("to_number_hex", "to_number", S("0x10"))
    add("to_number_spaces", "to_number", S(" 12 "), "int32")
    add("to_number_plus", "to_number", S("+5"), "int64")
    add("to_number_bad_type", "to_number", S("1"), "int8")
    add("to_number_uint32", "to_number", S("4294967295", "0"), "uint32")
    add("to_number_uint32_negative", "to_number", S("-1"), "uint32")
    add("to_number_underscore", "to_number", S("1_000"))
    add("to_number_trailing_text", "to_number", S("12abc"), "int64")
    add("to_number_inf_words", "to_number", S("Infinity", "-INF", "NaN", "1.", ".5", "1e+3"), "float64")

    for fmt, inputs in (
        ("{}", [B("hi")]), ("x={} y={}", [A(3, "int32"), A(2.5, "float32")]),
        ("{}", [A([1, 2, 3], "int64")]), ("{}", [S("a", "b")]), ("{}", [A([[1.5, 2.25], [3, 4]], "float32")]),
        ("{}", [A(list(range(10)), "int32")]), ("{}", [A(True, "bool")]), ("{}", [A([0.1, 1e-7, 123456789.0], "float32")]),
        ("{}", [A([0.1, 1e-7], "float64")]), ("no placeholders", []), ("{} {}", [B("one")]),
    ):
        add(f"format_{fmt}_{len(c)}", "format", fmt, inputs)
    add("format_summarize", "format", "{}", [A(list(range(10)), "int32")], summarize=2)
    add("format_summarize_all", "format", "{}", [A(list(range(10)), "int32")], summarize=-1)
    add("format_placeholder", "format", "<>", [A(1, "int32")], placeholder="<>")
    add("format_3d", "format", "{}", [A(np.arange(24).reshape(2, 3, 4), "int32")])
    add("format_3d_summarize", "format", "{}", [A(np.arange(24).reshape(2, 3, 4), "int32")], summarize=1)
    add("format_4d_summarize", "format", "{}", [A(np.arange(81).reshape(3, 3, 3, 3), "int64")], summarize=1)
    add("format_summarize_0", "format", "{}", [A(np.arange(7), "uint8")], summarize=0)
    add("format_escapes", "format", "{}", [S(b"\xff\x00", b"a\"b'c\\\n\t\x7f")])
    add("format_float_kinds", "format", "{}", [A([float("nan"), -0.0, 1e20, 1.5, 1 / 3], "float32")])
    add("format_double_kinds", "format", "{}", [A([1 / 3, 1e-300, 0.1 + 0.2], "float64")])
    add("format_half", "format", "{}", [A([1.5, 0.1], "float16")])
    add("format_bool_vector", "format", "{} and {}", [A([True, False], "bool"), B("x")])
    add("format_unicode_template", "format", "é {} ü", [A(1, "int64")])
    add("format_2d_summarize", "format", "{}", [A(np.arange(36).reshape(6, 6), "int32")], summarize=2)

    floats = A([0.0, 1.0, -1.5, 3.14159265, 1e-8, 1.23456789e10, float("inf"), float("-inf"), float("nan")], "float32")
    doubles = A([0.0, 1.0, -1.5, 3.14159265358979, 1e-8, 1.23456789e10, 1e300], "float64")
    add("as_string_float", "as_string", floats)
    add("as_string_double", "as_string", doubles)
    add("as_string_prec", "as_string", floats, precision=3)
    add("as_string_sci", "as_string", floats, scientific=True)
    add("as_string_shortest", "as_string", floats, shortest=True)
    add("as_string_width", "as_string", floats, width=12)
    add("as_string_width_fill0", "as_string", floats, width=12, fill="0")
    add("as_string_prec_width", "as_string", doubles, precision=2, width=10)
    add("as_string_sci_prec", "as_string", doubles, precision=4, scientific=True)
    ints = A([0, 1, -1, 42, 2147483647, -2147483648], "int32")
    add("as_string_int", "as_string", ints)
    add("as_string_int_width", "as_string", ints, width=5)
    add("as_string_int_fill", "as_string", ints, width=5, fill="0")
    add("as_string_int_prec", "as_string", ints, precision=2)
    add("as_string_int64", "as_string", A([2**62, -(2**62)], "int64"))
    add("as_string_uint8", "as_string", A([0, 255], "uint8"))
    add("as_string_bool", "as_string", A([True, False], "bool"))
    add("as_string_string", "as_string", S("a", "b"))
    add("as_string_sci_shortest", "as_string", floats, scientific=True, shortest=True)
    add("as_string_bad_fill", "as_string", floats, fill="ab")
    add("as_string_int_sci", "as_string", ints, scientific=True)
    add("as_string_int_shortest", "as_string", ints, shortest=True)
    add("as_string_fill_space", "as_string", floats, width=10, fill=" ")
    add("as_string_fill_minus", "as_string", floats, width=14, fill="-")
    add("as_string_fill_plus", "as_string", floats, width=10, fill="+")
    add("as_string_fill_hash", "as_string", floats, shortest=True, fill="#")
    add("as_string_fill_bad", "as_string", ints, width=5, fill="x")
    # (the sign of a NaN does not survive JSON; tests/strings check "-nan" by hand)
    add("as_string_nan_width", "as_string", A([float("nan"), float("-inf"), 0.0, -0.0], "float32"), width=6, fill="0")
    add("as_string_int8", "as_string", A([-128, 127, -1], "int8"), width=4, fill="0")
    add("as_string_uint64", "as_string", A([0, 2**64 - 1], "uint64"))
    add("as_string_int16", "as_string", A([-32768, 32767], "int16"))
    add("as_string_shortest_prec", "as_string", doubles, precision=10, width=3, fill="0", shortest=True)
    add("as_string_half", "as_string", A([0.5, 1.25, 65504], "float16"))

    add("split_dense_2d_sep", "split", S("1,2,3", "4", "5,6", "7,8,9", shape=[2, 2]), ",")
    add("split_empty_vector", "split", S(shape=[0]))
    add("split_empty_string", "split", S(""))
    add("split_v2_maxsplit_ws", "split", S("1 2 3", "  4  5    6  "), maxsplit=1)
    lines = R([["Ab cD", "E"], [], ["fG"]])
    add("ragged_length", "length", lines)
    add("ragged_lower", "lower", lines)
    add("ragged_upper", "upper", lines)
    add("ragged_strip", "strip", R([[" a ", "b "], ["\tc"]]))
    add("ragged_regex_replace", "regex_replace", lines, "[A-Z]", "#")
    add("ragged_regex_full_match", "regex_full_match", lines, "[A-Z].*")
    add("ragged_hash_fast", "to_hash_bucket_fast", lines, 10)
    add("ragged_hash_strong", "to_hash_bucket_strong", lines, 10, [1, 2])
    add("ragged_to_number", "to_number", R([["1", "2.5"], [], ["-3"]]))
    add("ragged_to_number_int", "to_number", R([["1", "2"], ["-3"]]), "int32")
    add("ragged_substr", "substr", lines, 0, 1)
    add("ragged_as_string", "as_string", R([[1, 22], [], [333]], "int32"), width=4)
    add("ragged_ngrams_sep", "ngrams", R([["a", "b", "c"], ["d"]]), 2, separator="_", pad_values="$")
    add("bytes_split_scalar", "bytes_split", B("hello"))
    add("bytes_split_vec", "bytes_split", S("hello", "", "ab"))
    add("bytes_split_2d", "bytes_split", S("ab", "c", "", "def", shape=[2, 2]))

    grid = S("this", "is", "a", "test", shape=[2, 2])
    add("reduce_join_all", "reduce_join", grid)
    add("reduce_join_axis0", "reduce_join", grid, 0)
    add("reduce_join_axis1", "reduce_join", grid, 1, separator="-")
    add("reduce_join_keepdims", "reduce_join", grid, 1, keepdims=True, separator=" ")
    add("reduce_join_neg", "reduce_join", grid, -1)
    add("reduce_join_list_axis", "reduce_join", S(*"abcdefgh", shape=[2, 2, 2]), [0, 2])
    add("reduce_join_bad_axis", "reduce_join", grid, 2)
    add("reduce_join_empty", "reduce_join", S(shape=[0]))
    add("reduce_join_ragged", "reduce_join", R([["a", "b"], [], ["c"]]), -1, separator="|")

    for enc in ("UTF-8",):
        add("unicode_decode", "unicode_decode", S("Hello", "Ünï", "😀", ""), enc)
        add("unicode_decode_scalar", "unicode_decode", B("héllo"), enc)
        add("unicode_decode_replace", "unicode_decode", S(b"a\xffb", b"\xc3", b"\xe2\x82"), enc)
        add("unicode_decode_replace_char", "unicode_decode", S(b"a\xffb"), enc, replacement_char=63)
        add("unicode_decode_ignore", "unicode_decode", S(b"a\xffb\xc3"), enc, errors="ignore")
        add("unicode_decode_strict", "unicode_decode", S(b"a\xffb"), enc, errors="strict")
        add("unicode_decode_ctrl", "unicode_decode", S("a\x00b\x01"), enc, replace_control_characters=True)
        add("unicode_decode_int64", "unicode_decode", S("ab"), enc, tf.int64.name)
        add("unicode_decode_2d", "unicode_decode", S("ab", "c", "", "déf", shape=[2, 2]), enc)
        add("unicode_split", "unicode_split", S("Hello", "Ünï", "😀", ""), enc)
        add("unicode_split_scalar", "unicode_split", B("héllo"), enc)
        add("unicode_split_replace", "unicode_split", S(b"a\xffb"), enc)
        add("unicode_decode_with_offsets", "unicode_decode_with_offsets", S("héllo", "😀a"), enc)
        add("unicode_split_with_offsets", "unicode_split_with_offsets", S("héllo", "😀a"), enc)
    add("unicode_decode_utf16", "unicode_decode", S("hé".encode("utf-16-be")), "UTF-16-BE")
    add("unicode_decode_utf32", "unicode_decode", S("h😀".encode("utf-32-be")), "UTF-32-BE")
    add("unicode_decode_latin1", "unicode_decode", S(b"h\xe9"), "ISO-8859-1")
    add("unicode_decode_lowercase_name", "unicode_decode", S("a"), "utf-8")
    add("unicode_decode_surrogate_utf8", "unicode_decode", S(b"\xed\xa0\x80x"), "UTF-8")
    add("unicode_decode_bad_sequences", "unicode_decode",
        S(b"\xf4\x90\x80\x80x", b"\xc0\xafx", b"\xe0\x80\xafx", b"\xf8\x88\x80\x80\x80x", b"\xef\xbf\xbd"), "UTF-8")
    add("unicode_decode_utf16_lone_surrogate", "unicode_decode", S(b"\xd8\x00\x00a", b"\x00", b"\xdc\x00"), "UTF-16-BE")
    add("unicode_decode_utf32_too_large", "unicode_decode", S(b"\x00\x11\x00\x00\x00\x00\x00a"), "UTF-32-BE")
    add("unicode_decode_offsets_errors", "unicode_decode_with_offsets", S(b"a\xffb\xe2\x82c"), "UTF-8")
    add("unicode_decode_ascii", "unicode_decode", S(b"\x80abc"), "US-ASCII")
    add("unicode_decode_utf16_bom", "unicode_decode", S(b"ab", b"\xfe\xff\x00a", b"\xff\xfea\x00"), "UTF-16")
    add("unicode_decode_utf16_le", "unicode_decode", S("hé".encode("utf-16-le")), "UTF-16-LE")
    add("unicode_decode_bad_replacement", "unicode_decode", S(b"a\xff"), "UTF-8", "replace", 0x110000)
    add("unicode_encode_bad_replacement", "unicode_encode", A([72, -1], "int32"), "UTF-8", "replace", 0x110000)
    add("unicode_encode_surrogate_replacement", "unicode_encode", A([72, -1], "int32"), "UTF-8", "replace", 0xD800)
    add("unicode_encode_le_refused", "unicode_encode", A([72], "int32"), "UTF-16-LE")
    add("unicode_split_utf16", "unicode_split", S("hé".encode("utf-16-be"), b"\xd8\x00"), "UTF-16-BE")
    add("unicode_decode_ctrl_ignore", "unicode_decode_with_offsets", S(b"a\x00b"), "UTF-8", errors="ignore",
        replace_control_characters=True)
    add("unicode_decode_ctrl_strict", "unicode_decode", S(b"a\x00b"), "UTF-8", errors="strict",
        replace_control_characters=True)
    add("unicode_transcode_ctrl_strict", "unicode_transcode", S(b"a\x00b"), "UTF-8", "UTF-8", errors="strict",
        replace_control_characters=True)
    add("unicode_transcode_ctrl_ignore", "unicode_transcode", S(b"a\x00b"), "UTF-8", "UTF-8", errors="ignore",
        replace_control_characters=True)
    add("unicode_decode_bad_encoding", "unicode_decode", S("a"), "KOI8-Z")
    add("unicode_encode_1d", "unicode_encode", A([72, 101, 108, 108, 111], "int32"), "UTF-8")
    add("unicode_encode_ragged", "unicode_encode", R([[72, 233], [128512], []], "int32"), "UTF-8")
    add("unicode_encode_2d", "unicode_encode", A([[72, 105], [111, 107]], "int32"), "UTF-8")
    add("unicode_encode_utf16", "unicode_encode", A([72, 128512], "int32"), "UTF-16-BE")
    add("unicode_encode_utf32", "unicode_encode", A([72, 128512], "int32"), "UTF-32-BE")
    add("unicode_encode_bad_cp", "unicode_encode", A([72, -1, 0x110000, 0xD800], "int32"), "UTF-8")
    add("unicode_encode_bad_cp_char", "unicode_encode", A([72, -1], "int32"), "UTF-8", replacement_char=63)
    add("unicode_encode_bad_cp_ignore", "unicode_encode", A([72, -1], "int32"), "UTF-8", errors="ignore")
    add("unicode_encode_bad_cp_strict", "unicode_encode", A([72, -1], "int32"), "UTF-8", errors="strict")
    add("unicode_transcode", "unicode_transcode", S("héllo", b"a\xffb"), "UTF-8", "UTF-16-BE")
    add("unicode_transcode_utf16_in", "unicode_transcode", S("hé".encode("utf-16-be")), "UTF-16-BE", "UTF-8")
    add("unicode_script", "unicode_script", A([72, 1041, 1488, 19968, 0, -1, 12354], "int32"))

    toks = R([["a", "b", "c", "d"], ["e", "f"], ["g"], []])
    add("ngrams_2", "ngrams", toks, 2)
    add("ngrams_2_3", "ngrams", toks, [2, 3], separator="|")
    add("ngrams_pad", "ngrams", toks, 3, pad_values=("<s>", "</s>"))
    add("ngrams_pad_width", "ngrams", toks, 3, pad_values="#", padding_width=1)
    add("ngrams_short", "ngrams", toks, 3, preserve_short_sequences=True)
    add("ngrams_dense", "ngrams", S("a", "b", "c", "d", "e", "f", shape=[2, 3]), 2)
    add("ngrams_1d", "ngrams", S("a", "b", "c"), 2)
    add("ngrams_1d_unigram", "ngrams", S("a", "b", "c"), 1)
    add("ngrams_width_too_big", "ngrams", S("a", "b"), 3)
    add("ngrams_bad_pad_width", "ngrams", S("a", "b"), 2, pad_values="#", padding_width=2)
    add("ngrams_pad_preserve", "ngrams", toks, 4, pad_values=("<", ">"), padding_width=1, preserve_short_sequences=True)

    add("unsorted_segment_join", "unsorted_segment_join", S("this", "is", "a", "test"), A([0, 1, 0, 1], "int32"), 2,
        separator=":")
    add("unsorted_segment_join_2d", "unsorted_segment_join", S("a", "b", "c", "d", "e", "f", shape=[3, 2]),
        A([1, 0, 1], "int32"), 3)
    add("unsorted_segment_join_neg", "unsorted_segment_join", S("a", "b", "c"), A([0, -1, 1], "int32"), 2)
    add("unsorted_segment_join_oob", "unsorted_segment_join", S("a", "b"), A([0, 5], "int32"), 2)
    return c


def sparse_cases() -> list[tuple]:
    c: list[tuple] = []
    add = lambda name, op, *args, **kwargs: c.append((name, op, list(args), kwargs))  # noqa: E731
    st = SP([[0, 0], [0, 2], [1, 1], [2, 3]], [1, 2, 3, 4], [3, 4], "int32")
    st_unordered = SP([[2, 3], [0, 2], [1, 1], [0, 0]], [4, 2, 3, 1], [3, 4], "int32")
    st_str = SP([[0, 0], [1, 2]], ["a", "b"], [2, 3], "string")
    st_f = SP([[0, 1, 0], [1, 0, 1], [1, 1, 1]], [1.5, -2.0, 3.0], [2, 2, 2], "float32")

    add("to_dense", "to_dense", st)
    add("to_dense_default", "to_dense", st, default_value=-1)
    add("to_dense_str", "to_dense", st_str)
    add("to_dense_str_default", "to_dense", st_str, default_value=B("?"))
    add("to_dense_unordered", "to_dense", st_unordered)
    add("to_dense_unordered_novalidate", "to_dense", st_unordered, validate_indices=False)
    add("to_dense_dup", "to_dense", SP([[0, 0], [0, 0]], [1, 2], [2, 2], "int32"))
    add("to_dense_oob", "to_dense", SP([[0, 5]], [1], [2, 2], "int32"))
    add("to_dense_3d", "to_dense", st_f)
    add("from_dense", "from_dense", A([[0, 1, 0], [2, 0, 3]], "int32"))
    add("from_dense_str", "from_dense", S("", "a", "b", "", shape=[2, 2]))
    add("from_dense_float", "from_dense", A([[0.0, -0.0, 1.5]], "float32"))
    add("from_dense_bool", "from_dense", A([True, False, True], "bool"))
    add("from_dense_scalar", "from_dense", A(5, "int32"))
    add("reorder", "reorder", st_unordered)
    add("reshape", "reshape", st, [2, 6])
    add("reshape_neg", "reshape", st, [-1, 2])
    add("reshape_3d", "reshape", st, [2, 3, 2])
    add("reshape_bad", "reshape", st, [5, 3])
    add("reshape_two_neg", "reshape", st, [-1, -1])
    st2 = SP([[0, 1], [2, 0]], [5, 6], [3, 2], "int32")
    add("concat_axis1", "concat", 1, [st, st2])
    add("concat_axis0", "concat", 0, [st, SP([[0, 3]], [9], [1, 4], "int32")])
    add("concat_neg_axis", "concat", -1, [st, st2])
    add("concat_expand", "concat", 1, [st, SP([[0, 0], [3, 1]], [7, 8], [4, 2], "int32")], expand_nonconcat_dims=True)
    add("concat_mismatch", "concat", 1, [st, SP([[0, 0]], [7], [4, 2], "int32")])
    add("slice", "slice", st, [0, 1], [2, 3])
    add("slice_past_end", "slice", st, [1, 2], [5, 5])
    add("slice_empty", "slice", st, [0, 3], [1, 1])
    add("retain", "retain", st, A([True, False, True, False], "bool"))
    add("to_indicator", "to_indicator", SP([[0, 0], [0, 1], [1, 0], [1, 3]], [0, 3, 2, 3], [2, 4], "int64"), 5)
    add("to_indicator_oob", "to_indicator", SP([[0, 0]], [7], [1, 1], "int64"), 5)
    add("add_sparse", "add", st, SP([[0, 0], [1, 2], [2, 3]], [10, 20, -4], [3, 4], "int32"))
    add("add_sparse_threshold", "add", SP([[0, 0]], [1.0], [2, 2], "float32"),
        SP([[0, 0], [1, 1]], [-0.5, 0.1], [2, 2], "float32"), 0.6)
    add("add_dense", "add", st, A(np.ones((3, 4)), "int32"))
    add("add_shape_mismatch", "add", st, SP([[0, 0]], [1], [3, 5], "int32"))
    add("transpose", "transpose", st)
    add("transpose_perm", "transpose", st_f, [2, 0, 1])
    add("expand_dims", "expand_dims", st, 1)
    add("expand_dims_neg", "expand_dims", st, -1)
    add("reduce_sum", "reduce_sum", st)
    add("reduce_sum_axis", "reduce_sum", st, 1)
    add("reduce_sum_keepdims", "reduce_sum", st, 0, keepdims=True)
    add("reduce_sum_sparse_output", "reduce_sum", st, 1, output_is_sparse=True)
    add("reduce_max", "reduce_max", st_f, 2)
    add("reduce_max_all", "reduce_max", st)
    add("fill_empty_rows", "fill_empty_rows", SP([[0, 1], [2, 0]], [5, 6], [4, 2], "int32"), -1)
    add("eye", "eye", 3)
    add("eye_rect", "eye", 2, 4, dtype="int32")
    add("maximum", "maximum", st, SP([[0, 0], [1, 2]], [7, -1], [3, 4], "int32"))
    add("minimum", "minimum", st, SP([[0, 0], [1, 2]], [7, -1], [3, 4], "int32"))
    add("split", "split", st, 2, 1)
    add("split_axis0", "split", st, 3, 0)
    add("softmax", "softmax", SP([[0, 0], [0, 2], [1, 1]], [1.0, 2.0, 3.0], [2, 3], "float32"))
    add("sparse_dense_matmul", "sparse_dense_matmul", st, A(np.arange(8).reshape(4, 2), "int32"))
    add("sparse_dense_matmul_adjoint", "sparse_dense_matmul", st, A(np.arange(6).reshape(3, 2), "int32"),
        adjoint_a=True)
    add("segment_sum", "segment_sum", A([[1, 2], [3, 4], [5, 6]], "float32"), A([0, 2], "int32"), A([0, 0], "int32"))
    add("segment_mean", "segment_mean", A([[1, 2], [3, 4], [5, 6]], "float32"), A([0, 1, 2], "int32"),
        A([0, 0, 1], "int32"))
    add("segment_sqrt_n", "segment_sqrt_n", A([[1, 2], [3, 4], [5, 6]], "float32"), A([0, 1, 2], "int32"),
        A([0, 0, 1], "int32"))
    add("reset_shape", "reset_shape", st, [5, 6])
    add("reset_shape_tight", "reset_shape", st)
    add("map_values_absent", "to_dense", SP([], [], [2, 2], "float32"))
    add("bincount", "bincount", SP([[0, 0], [0, 1], [1, 0]], [1, 1, 3], [2, 2], "int32"), minlength=4)
    add("bincount_axis", "bincount", SP([[0, 0], [0, 1], [1, 0]], [1, 1, 3], [2, 2], "int32"), axis=-1, minlength=4)
    b = SP([[0, 0], [0, 1], [1, 0], [1, 2]], [1, 1, 3, 5], [2, 3], "int32")
    add("bincount_sparse", "bincount", b)
    add("bincount_maxlength", "bincount", b, maxlength=4)
    add("bincount_rows_binary", "bincount", b, minlength=8, axis=-1, binary_output=True)
    add("bincount_dense_rows", "bincount", A([[1, 1, 0], [2, 2, 2]], "int32"), axis=-1)
    add("bincount_dense", "bincount", A([1, 1, 0, 7], "int64"))
    add("bincount_weights", "bincount", b,
        weights=SP([[0, 0], [0, 1], [1, 0], [1, 2]], [0.5, 1, 2, 3], [2, 3], "float32"))
    add("bincount_dense_weights", "bincount", A([[1, 1, 0], [2, 2, 2]], "int64"),
        weights=A([[1, 2, 3], [4, 5, 6]], "float32"), axis=-1)
    add("bincount_negative", "bincount", A([-1, 2], "int32"))
    add("bincount_bad_axis", "bincount", A([[1]], "int32"), axis=1)
    add("bincount_float", "bincount", A([1.5], "float32"))
    fa = SP([[0, 0], [0, 1], [1, 0]], ["a", "b", "c"], [2, 2], "string")
    fb = S("d", "e", shape=[2, 1])
    fc = SP([[0, 0], [1, 0], [1, 1]], [1, 2, 3], [2, 2], "int64")
    add("cross_sparse_dense", "cross", [fa, fb])
    add("cross_dense_first", "cross", [fb, fa])
    add("cross_three", "cross", [fa, fb, fc])
    add("cross_one", "cross", [fa])
    add("cross_separator", "cross", [fa, fb], separator="+")
    add("cross_empty_feature", "cross", [fa, SP([], [], [2, 2], "string")])
    add("cross_product_order", "cross", [S("a", "b", shape=[1, 2]), S("c", "d", shape=[1, 2]), S("e", "f", shape=[1, 2])])
    add("cross_dense_int", "cross", [A([[1, 2]], "int32"), S("q", shape=[1, 1])])
    add("cross_dense_not_matrix", "cross", [fa, S("x")])
    add("cross_hashed_full", "cross_hashed", [fa, fb])
    add("cross_hashed_buckets", "cross_hashed", [fa, fb, fc], 100)
    add("cross_hashed_key", "cross_hashed", [fa, fb], 1000, 12345)
    add("cross_hashed_ints", "cross_hashed", [A([[1, 2], [3, -4]], "int64"), fc], 97)
    add("cross_hashed_one", "cross_hashed", [fa], 10)
    add("sampled_addmm", "sampled_addmm", A([[0, 0], [1, 1]], "int32"), A([0.5, 0.3], "float32"), A([2, 2], "int32"),
        A(np.arange(1, 7).reshape(2, 3), "float32"), A(np.arange(7, 13).reshape(3, 2), "float32"), beta=0.25, alpha=0.75)
    add("sampled_addmm_batch", "sampled_addmm", A([[[0, 1], [1, 0]], [[0, 0], [1, 0]]], "int32"),
        A([[3, 5], [2, 7]], "float32"), A([2, 2], "int32"), A(np.arange(1, 13).reshape(2, 2, 3), "float32"),
        A(np.arange(13, 25).reshape(2, 3, 2), "float32"), beta=0.25, alpha=0.75)
    add("sampled_addmm_float64", "sampled_addmm", A([[0, 1]], "int32"), A([1.0], "float64"), A([2, 2], "int32"),
        A([[1.0, 2.0], [3.0, 4.0]], "float64"), A([[0.5, 1.5], [2.5, 3.5]], "float64"), output_type="float64")
    return c


def signatures() -> dict:
    """``{module: {function: [[parameter, kind, default]]}}``; a dtype default is written as its name."""
    import inspect

    out: dict = {}
    for module_name, module in (("tf.strings", tf.strings), ("tf.sparse", tf.sparse)):
        table = out.setdefault(module_name, {})
        for name in sorted(n for n in dir(module) if not n.startswith("_")):
            params = []
            for p in inspect.signature(getattr(module, name)).parameters.values():
                default = p.default
                if default is inspect.Parameter.empty:
                    default = {"required": True}
                elif isinstance(default, tf.dtypes.DType):
                    default = {"dtype": default.name}
                params.append([p.name, p.kind.name, default])
            table[name] = params
    return out


SIGNATURES_OUT = os.path.join(HERE, "..", "tests", "strings", "fixtures", "signatures.json")


def main() -> None:
    print(f"TensorFlow {tf.__version__}", file=sys.stderr)
    with open(SIGNATURES_OUT, "w") as f:
        json.dump({"_tf_version": tf.__version__, **signatures()}, f)
        f.write("\n")
    for out, module, cases in ((STRINGS_OUT, tf.strings, strings_cases()), (SPARSE_OUT, tf.sparse, sparse_cases())):
        records = run(module, [case for case in cases if case is not None])
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as f:
            head = {"_tf_version": tf.__version__, "_about": "Made by tools/make_strings_fixtures.py."}
            f.write(json.dumps(head)[:-1] + ', "cases": [\n')
            f.write(",\n".join(json.dumps(r, ensure_ascii=True) for r in records))
            f.write("\n]}\n")
        errors = sum("error" in r for r in records)
        print(f"{out}: {len(records)} cases ({errors} TensorFlow errors)", file=sys.stderr)


if __name__ == "__main__":
    main()
