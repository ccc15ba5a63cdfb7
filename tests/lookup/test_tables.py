"""tps.lookup: StaticHashTable / StaticVocabularyTable over KeyValueTensorInitializer and
TextFileInitializer, NumPy only, usable inside tpsd.Dataset.map."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd


def _fruit_table():
    init = tps.lookup.KeyValueTensorInitializer(["apple", "banana", "cherry"], [0, 1, 2],
                                                value_dtype=np.int64)
    return tps.lookup.StaticHashTable(init, default_value=-1)


def test_a_hash_table_looks_up_arrays_of_any_shape_with_the_default_for_missing_keys():
    table = _fruit_table()
    keys = np.array([[b"banana", b"kiwi"], [b"apple", b"cherry"]], dtype=object)
    np.testing.assert_array_equal(table.lookup(keys), [[1, -1], [0, 2]])
    assert table.lookup(b"cherry") == 2 and table.lookup("kiwi") == -1
    assert table[np.array(["apple"])].tolist() == [0]
    assert int(table.size()) == 3
    exported_keys, exported_values = table.export()
    assert exported_keys.tolist() == [b"apple", b"banana", b"cherry"] and exported_values.tolist() == [0, 1, 2]


def test_integer_keys_and_string_values():
    table = tps.lookup.StaticHashTable(
        tps.lookup.KeyValueTensorInitializer(np.array([3, 7], np.int64), ["three", "seven"]), "?")
    assert table.lookup(np.array([7, 3, 5])).tolist() == [b"seven", b"three", b"?"]


def test_a_vocabulary_table_gives_ids_and_stable_buckets_past_the_vocabulary():
    init = tps.lookup.KeyValueTensorInitializer(["a", "b"], np.array([0, 1], np.int64))
    table = tps.lookup.StaticVocabularyTable(init, num_oov_buckets=3)
    ids = table.lookup(np.array([b"a", b"zz", b"b", b"zz", b"q"], dtype=object))
    assert ids[[0, 2]].tolist() == [0, 1]
    assert ids[1] == ids[3] and all(2 <= i < 5 for i in ids[[1, 3, 4]])
    assert int(table.size()) == 5
    again = tps.lookup.StaticVocabularyTable(init, num_oov_buckets=3).lookup(b"zz")
    assert again == ids[1]


def test_a_text_file_initializer_reads_columns_lines_and_line_numbers(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("hello\t10\nworld\t20\nagain\t30\n")
    by_column = tps.lookup.StaticHashTable(tps.lookup.TextFileInitializer(
        str(vocab), str, 0, np.int64, 1), default_value=0)
    assert by_column.lookup(np.array([b"world", b"nope"], dtype=object)).tolist() == [20, 0]
    words = tmp_path / "words.txt"
    words.write_text("the\nquick\nfox\n")
    ids = tps.lookup.StaticVocabularyTable(tps.lookup.TextFileInitializer(
        str(words), str, tps.lookup.TextFileIndex.WHOLE_LINE, np.int64,
        tps.lookup.TextFileIndex.LINE_NUMBER), num_oov_buckets=1)
    assert ids.lookup(np.array([b"fox", b"the", b"dog"], dtype=object)).tolist() == [2, 0, 3]
    with pytest.raises(tps.errors.InvalidArgumentError, match="expected 5 lines, the file has 3"):
        tps.lookup.TextFileInitializer(str(words), str, -2, np.int64, -1, vocab_size=5)
    with pytest.raises(tps.errors.NotFoundError, match="No such file"):
        tps.lookup.TextFileInitializer(str(tmp_path / "missing.txt"), str, -2, np.int64, -1)


def test_tables_work_inside_a_dataset_map():
    table = _fruit_table()
    ds = tpsd.Dataset.from_tensor_slices(["cherry", "kiwi", "apple", "banana"]).map(table.lookup)
    assert [int(x) for x in ds] == [2, -1, 0, 1]
    batched = tpsd.Dataset.from_tensor_slices(["cherry", "kiwi", "apple"]).batch(2).map(table.lookup)
    assert [b.tolist() for b in batched] == [[2, -1], [0]]


def test_a_key_of_the_wrong_kind_is_an_invalid_argument_error():
    with pytest.raises(tps.errors.InvalidArgumentError, match=r"keys are strings; received the key 3"):
        _fruit_table().lookup(np.array([3]))


@pytest.mark.parametrize("call,error,match", [
    (lambda: tps.lookup.KeyValueTensorInitializer(["a", "b"], [1]), ValueError,
     "same length; received 2 keys and 1 values"),
    (lambda: tps.lookup.StaticHashTable({"a": 1}, -1), TypeError,
     "initializer must be a tps.lookup.KeyValueTensorInitializer or TextFileInitializer; received dict"),
    (lambda: tps.lookup.StaticHashTable(tps.lookup.KeyValueTensorInitializer(["a"], [1]), "x"),
     TypeError, "default_value='x' does not match"),
    (lambda: tps.lookup.StaticVocabularyTable(tps.lookup.KeyValueTensorInitializer(["a"], [0]), 0),
     ValueError, "num_oov_buckets must be a positive int; received num_oov_buckets=0"),
    (lambda: tps.lookup.StaticHashTable(tps.lookup.KeyValueTensorInitializer(["a", "a"], [0, 1]), -1),
     tps.errors.FailedPreconditionError, "duplicate keys"),
])
def test_bad_arguments_say_what_was_received(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_the_lookup_package_does_not_import_jax():
    code = ("import sys, numpy as np, tpustrategy.lookup as L\n"
            "t = L.StaticHashTable(L.KeyValueTensorInitializer(['a'], [1]), -1)\n"
            "assert t.lookup(np.array([b'a'], dtype=object)).tolist() == [1]\n"
            "print('jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
