"""`ignore_errors`: TensorFlow's ignore_errors_test.py cases, parallel stages going on after an error."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy._src.data.transformations import ignore_errors as ignore_errors_module
from tpustrategy.testing import assert_iterator_checkpointing

Dataset = tpsd.Dataset

COMPONENTS = np.array([1.0, 2.0, 3.0, np.nan, 5.0], np.float32)


def check_numerics(x):
    if np.isnan(x):
        raise ValueError("message : Tensor had NaN values")
    return x


def test_map_errors_are_dropped():
    ds = Dataset.from_tensor_slices(COMPONENTS).map(check_numerics).ignore_errors()
    assert [float(x) for x in ds] == [1.0, 2.0, 3.0, 5.0]


def test_log_warning_reports_each_ignored_error():
    ds = Dataset.from_tensor_slices(COMPONENTS).map(check_numerics).ignore_errors(log_warning=True)
    with pytest.warns(UserWarning, match="Dataset.ignore_errors: ignoring an error in the input: ValueError: .*Tensor had NaN values"):
        assert [float(x) for x in ds] == [1.0, 2.0, 3.0, 5.0]


def test_without_log_warning_nothing_is_reported(recwarn):
    list(Dataset.from_tensor_slices(COMPONENTS).map(check_numerics).ignore_errors())
    assert not [w for w in recwarn if "ignore_errors" in str(w.message)]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_parallel_map_and_prefetch_go_on_after_an_error(workers):
    ds = Dataset.from_tensor_slices(COMPONENTS).map(check_numerics, num_parallel_calls=workers).prefetch(2).ignore_errors()
    assert [float(x) for x in ds] == [1.0, 2.0, 3.0, 5.0]


def test_many_failing_elements_in_parallel_stages():
    values = np.where(np.arange(200) % 3 == 0, np.nan, np.arange(200)).astype(np.float32)
    ds = Dataset.from_tensor_slices(values).map(check_numerics, num_parallel_calls=4).prefetch(3).ignore_errors()
    assert [int(x) for x in ds] == [i for i in range(200) if i % 3]


def test_a_batch_with_a_failing_element_is_dropped_whole():
    values = np.array([np.nan, 1, np.nan, np.nan, 2, 3, np.nan, 5, np.nan], np.float32)
    ds = Dataset.from_tensor_slices(values).map(check_numerics).batch(2).ignore_errors()
    assert [b.tolist() for b in ds] == [[2.0, 3.0]]


def test_missing_files_read_in_a_parallel_map_are_skipped(tmp_path):
    names = [str(tmp_path / f"file_{i}.txt") for i in range(5)]
    for name in names:
        with open(name, "w") as f:
            f.write(name)

    def read_file(name):
        with open(name.decode() if isinstance(name, bytes) else name, "rb") as f:
            return f.read()

    ds = Dataset.from_tensor_slices(names).map(read_file, num_parallel_calls=2).prefetch(2).ignore_errors()
    assert list(ds) == [n.encode() for n in names]
    os.remove(names[0])
    assert list(ds) == [n.encode() for n in names[1:]]


def test_corrupt_tfrecord_tails_are_skipped(tmp_path):
    names = []
    for i in range(5):
        name = str(tmp_path / f"tf_record.{i}.txt")
        with tpsd.TFRecordWriter(name) as w:
            for _ in range(10):
                w.write(b"record")
        with open(name, "a") as f:
            f.write("corrupted data")
        names.append(name)
    assert list(tpsd.TFRecordDataset(names).ignore_errors()) == [b"record"] * 50


def test_zip_advances_every_input_past_a_failing_element():
    a = Dataset.from_tensor_slices([1.0, 2.0, 0.0, 4.0])
    b = a.map(lambda x: check_numerics(np.float32(1.0) / x if x else np.float32(np.nan)))
    ds = Dataset.zip((b, a)).ignore_errors()
    assert [(float(p), float(q)) for p, q in ds] == [(1.0, 1.0), (0.5, 2.0), (0.25, 4.0)]


def test_cardinality_is_unknown():
    assert Dataset.range(10).ignore_errors().cardinality() == tpsd.UNKNOWN_CARDINALITY


def test_end_of_input_is_not_an_error_and_keyboard_interrupt_is_not_swallowed():
    assert [int(x) for x in Dataset.range(3).ignore_errors()] == [0, 1, 2]

    def interrupt(x):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        list(Dataset.range(3).map(interrupt).ignore_errors())


def test_an_input_that_never_stops_failing_gets_a_runtime_error(monkeypatch):
    monkeypatch.setattr(ignore_errors_module, "MAX_CONSECUTIVE_ERRORS", 50)
    ds = Dataset.range(10).repeat().map(lambda x: 1 // 0).ignore_errors()
    with pytest.raises(RuntimeError, match="raised 50 errors in a row without producing an element; the last: ZeroDivisionError"):
        next(iter(ds))


def test_log_warning_must_be_a_bool():
    with pytest.raises(TypeError, match="Dataset.ignore_errors: log_warning must be a bool"):
        Dataset.range(3).ignore_errors(log_warning="yes")


def test_checkpoint_at_every_position_of_tensorflows_pipeline():
    ds = Dataset.from_tensor_slices(COMPONENTS).map(check_numerics).ignore_errors()
    out = assert_iterator_checkpointing(ds, num_checkpoints=None)
    assert [float(x) for x in out] == [1.0, 2.0, 3.0, 5.0]


def test_checkpoint_at_every_position_through_parallel_stages():
    values = np.where(np.arange(60) % 4 == 1, np.nan, np.arange(60)).astype(np.float32)
    ds = Dataset.from_tensor_slices(values).map(check_numerics, num_parallel_calls=3).prefetch(2).ignore_errors()
    out = assert_iterator_checkpointing(ds, num_checkpoints=None)
    assert [int(x) for x in out] == [i for i in range(60) if i % 4 != 1]


def test_experimental_form():
    ds = Dataset.from_tensor_slices(COMPONENTS).map(check_numerics).apply(tpsd.experimental.ignore_errors())
    assert len(list(ds)) == 4


def test_without_ignore_errors_the_first_error_still_ends_the_iteration():
    it = iter(Dataset.from_tensor_slices(COMPONENTS).map(check_numerics, num_parallel_calls=2).prefetch(2))
    assert [float(next(it)) for _ in range(3)] == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="Tensor had NaN values"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)


def test_elements_after_a_failure_in_a_bulk_read_are_not_lost():
    values = np.where(np.arange(3000) % 7 == 3, np.nan, np.arange(3000)).astype(np.float32)
    expected = [i for i in range(3000) if i % 7 != 3]
    mapped = Dataset.from_tensor_slices(values).map(check_numerics)
    assert [int(x) for x in mapped.prefetch(64).ignore_errors()] == expected
    filtered = Dataset.from_tensor_slices(values).filter(lambda x: check_numerics(x) >= 0)
    assert [int(x) for x in filtered.prefetch(64).ignore_errors()] == expected
    rebatched = mapped.batch(10).ignore_errors().unbatch()
    assert all(int(x) % 7 != 3 for x in rebatched)


def test_checkpoint_while_elements_after_a_failure_are_kept():
    values = np.where(np.arange(40) % 5 == 2, np.nan, np.arange(40)).astype(np.float32)
    ds = Dataset.from_tensor_slices(values).map(check_numerics).batch(4).ignore_errors()
    out = assert_iterator_checkpointing(ds, num_checkpoints=None)
    # TensorFlow's batch drops the batch an error hits and starts the next one after it.
    expected = [[float(v) for v in range(s, s + 4)] for s in range(3, 34, 5)] + [[38.0, 39.0]]
    assert [b.tolist() for b in out] == expected
