"""Cases from TensorFlow's own kernel tests and docstrings (their inputs and asserted results; our code).

Sources: tensorflow/python/kernel_tests/strings_ops/string_to_hash_bucket_op_test.py,
string_split_op_test.py, substr_op_test.py, reduce_join_op_test.py, regex_replace_op_test.py,
unicode_decode_op_test.py, ngrams docs and python/ops/string_ops.py docstrings.
"""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

import tpustrategy.strings as S
from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.strings.hashing import hash64, siphash24


def strings(*items):
    out = np.empty(len(items), dtype=object)
    out[:] = [i.encode() if isinstance(i, str) else i for i in items]
    return out


def test_fast_hash_buckets_are_fingerprint64_mod_buckets():
    # Fingerprint64('a') -> 12917804110809363939 -> mod 10 -> 9, 'b' -> 2, 'c' -> 2, 'd' -> 5
    assert S.to_hash_bucket_fast(["a", "b", "c", "d"], 10).tolist() == [9, 2, 2, 5]
    assert S.to_hash_bucket_fast(["a", "b", "c"], 1).tolist() == [0, 0, 0]
    assert S.to_hash_bucket_fast(["a"], 10).dtype == np.int64


def test_legacy_hash_buckets_are_tensorflows_hash64():
    assert hash64(b"a") == 2996632905371535868
    assert hash64(b"b") == 5795986006276551370
    assert hash64(b"c") == 14899841994519054197
    assert S.to_hash_bucket(["a", "b", "c"], 10).tolist() == [8, 0, 7]


def test_strong_hash_buckets_are_keyed_siphash():
    assert siphash24(98765, 132, b"a") == 7157389809176466784
    assert siphash24(98765, 132, b"b") == 15805638358933211562
    assert siphash24(98765, 132, b"c") == 18100027895074076528
    assert S.to_hash_bucket_strong(["a", "b", "c"], 10, key=[98765, 132]).tolist() == [4, 2, 8]
    assert S.to_hash_bucket_strong(["a", "b", "c"], 1, key=[123, 345]).tolist() == [0, 0, 0]


def test_strong_hash_with_a_one_element_key_raises_tensorflows_error():
    with pytest.raises(InvalidArgumentError, match="Key must have 2 elements"):
        S.to_hash_bucket_strong(["a", "b", "c"], 10, key=[98765])


def test_split_of_a_scalar_is_a_vector_and_of_a_vector_is_ragged():
    assert S.split("hello world").tolist() == [b"hello", b"world"]
    r = S.split(["pigs on the wing", "animals"])
    assert r.to_list() == [[b"pigs", b"on", b"the", b"wing"], [b"animals"]]
    assert r.row_lengths.tolist() == [4, 1] and r.values.shape == (2, 4) and r.values[1, 1] == b""
    assert r.shapes.tolist() == [[4], [1]]
    assert S.split(["1<>2<>3", "<><>4<>5"], sep="<>").to_list() == [[b"1", b"2", b"3"], [b"", b"", b"4", b"5"]]
    assert S.split("1,2,3,4", ",", maxsplit=1).tolist() == [b"1", b"2,3,4"]


def test_substr_counts_from_the_end_for_negative_positions():
    assert S.substr(strings("Hello", "World"), 1, 3).tolist() == [b"ell", b"orl"]
    assert S.substr(strings("Hello", "World"), -3, 2).tolist() == [b"ll", b"rl"]
    assert S.substr("Hello", 0, 100) == b"Hello"
    assert S.substr("Ünïcödé", 1, 3, unit="UTF8_CHAR") == "nïc".encode()


def test_substr_past_the_end_raises_tensorflows_error_naming_the_string():
    with pytest.raises(InvalidArgumentError, match=r"pos 6 out of range for string b'World' at index 1"):
        S.substr(strings("Hello", "World"), np.array([1, 6]), np.array([2, 1]))


def test_reduce_join_examples():
    grid = np.array([[b"abc", b"123"], [b"def", b"456"]], dtype=object)
    assert S.reduce_join(grid, axis=-1).tolist() == [b"abc123", b"def456"]
    assert S.reduce_join(grid, axis=-1, separator="-").tolist() == [b"abc-123", b"def-456"]
    assert S.reduce_join(grid, axis=0).tolist() == [b"abcdef", b"123456"]
    assert S.reduce_join(grid) == b"abc123def456"


def test_regex_replace_examples():
    assert S.regex_replace("Text with tags.<br /><b>contains html</b>", "<[^>]+>", " ") == (
        b"Text with tags.  contains html ")
    assert S.regex_replace(strings("aba\naba"), "a.*a", "(\\0)").tolist() == [b"(aba)\n(aba)"]
    assert S.regex_replace("aaa", "a", "b", replace_global=False) == b"baa"


def test_unicode_decode_example():
    decoded = S.unicode_decode(["G\xf6\xf6dnight", "\U0001f60a"], "UTF-8")
    assert decoded.to_list() == [[71, 246, 246, 100, 110, 105, 103, 104, 116], [128522]]
    assert decoded.values.dtype == np.int32


def test_ngrams_examples():
    assert S.ngrams(strings("A", "B", "C", "D"), 2).tolist() == [b"A B", b"B C", b"C D"]
    assert S.ngrams(strings("TF", "and", "keras"), 1).tolist() == [b"TF", b"and", b"keras"]


def test_as_string_examples():
    assert S.as_string(np.array([3, 2], np.int32)).tolist() == [b"3", b"2"]
    assert S.as_string(np.float32(3.1415926), precision=3) == b"3.142"


def test_to_number_rejects_text_with_tensorflows_message():
    with pytest.raises(InvalidArgumentError, match="StringToNumberOp could not correctly convert string: 1.5x"):
        S.to_number(["1.5x"])


def test_to_number_of_a_split_row_keeps_the_ragged_form():
    r = S.to_number(S.split(["1 2", "3"]), out_type=np.int32)
    assert r.to_list() == [[1, 2], [3]] and r.values.dtype == np.int32


# --- our own argument errors ---------------------------------------------------------------------------


def test_numbers_where_strings_are_needed_name_the_argument_and_the_fix():
    with pytest.raises(TypeError, match=r"(?s)tps.strings.length: `input` must be a string tensor.*as_string"):
        S.length(np.array([1, 2]))


def test_join_of_a_single_tensor_says_to_pass_a_list():
    with pytest.raises(TypeError, match=r"`inputs` must be a list of string tensors"):
        S.join(strings("a", "b"))


def test_join_of_different_shapes_raises_tensorflows_message():
    with pytest.raises(InvalidArgumentError, match=r"Input shapes do not match: \[2\] vs\. \[3\]"):
        S.join([strings("a", "b"), strings("a", "b", "c")])


def test_unicode_script_is_a_placeholder_that_says_why():
    from tpustrategy._src.not_provided import NotProvidedError

    with pytest.raises(NotProvidedError, match="ICU"):
        S.unicode_script([72])


def test_the_op_packages_import_neither_jax_nor_the_dataset_machinery():
    src = pathlib.Path(S.__file__).resolve().parents[1] / "_src"
    for package in ("strings", "sparse"):
        for path in (src / package).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                for name in names:
                    assert not name.startswith(("jax", "tpustrategy._src.data")), f"{path.name} imports {name}"


def test_ops_work_inside_dataset_map():
    import tpustrategy.data as tpsd

    ds = tpsd.Dataset.from_tensor_slices([b"1,2", b"3,4"]).map(
        lambda line: S.to_number(S.split(line, ","), out_type=np.int64))
    assert [e.tolist() for e in ds] == [[1, 2], [3, 4]]
    ds = tpsd.Dataset.from_tensor_slices(["Hello World"]).map(lambda s: S.lower(S.regex_replace(s, " ", "_")))
    assert list(ds) == [b"hello_world"]


def test_split_rows_ragged_batch_and_batched_split_give_the_same_rows():
    import tpustrategy.data as tpsd

    lines = [b"a b c", b"d", b"e f"]
    batch = next(iter(tpsd.Dataset.from_tensor_slices(lines).map(S.split).ragged_batch(3)))
    rows = next(iter(tpsd.Dataset.from_tensor_slices(lines).batch(3).map(S.split)))
    assert type(batch).__name__ == "RaggedBatch" and type(rows).__name__ == "RaggedRows"
    assert [r.tolist() for r in batch.to_list()] == rows.to_list() == [[b"a", b"b", b"c"], [b"d"], [b"e", b"f"]]
    np.testing.assert_array_equal(batch.values, rows.values)
    np.testing.assert_array_equal(batch.row_lengths, rows.row_lengths)
