"""TensorFlow's sample_from_datasets_test / choose_from_datasets_test / counter_test / random_test, ported."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.errors import InvalidArgumentError
from tpustrategy.testing import assert_iterator_checkpointing

D = tpsd.Dataset


def _weights(probs, kind):
    if kind == "list":
        return list(probs)
    if kind == "array":
        return np.asarray(probs)
    return D.from_tensors(np.asarray(probs)).repeat()


def _chi2(expected, actual):
    expected, actual = np.asarray(expected), np.asarray(actual)
    return float(np.sum((actual - expected) ** 2 / expected))


@pytest.mark.parametrize("kind", ["list", "array", "dataset"])
def test_sampled_frequencies_match_the_weights(kind):
    rng = np.random.default_rng(1619)
    rand = rng.random(5)
    for probs in ([0.85, 0.05, 0.1], list(rand / rand.sum()), [1.0]):
        ds = D.sample_from_datasets([D.from_tensors(np.int64(i)).repeat() for i in range(len(probs))],
                                    _weights(probs, kind), seed=7).take(5000)
        freqs = np.bincount([int(x) for x in ds], minlength=len(probs))
        assert freqs.sum() == 5000
        assert _chi2(probs, freqs / 5000) < 1e-2


def _three(kind, stop):
    datasets = [D.from_tensors(np.int64(-1)), D.from_tensors(np.int64(1)).repeat(), D.range(10).repeat()]
    return D.sample_from_datasets(datasets, weights=_weights([0.5, 0.1, 0.4], kind), stop_on_empty_dataset=stop)


@pytest.mark.parametrize("kind", ["list", "array", "dataset"])
def test_stopping_on_the_first_exhausted_dataset_gives_its_one_element_once(kind):
    out = [int(x) for x in _three(kind, True)]
    assert out.count(-1) == 1


@pytest.mark.parametrize("kind", ["list", "array", "dataset"])
def test_an_exhausted_dataset_is_skipped_without_stopping(kind):
    out = [int(x) for x in _three(kind, False).take(100)]
    assert len(out) == 100 and out.count(-1) == 1


@pytest.mark.parametrize("kind", ["list", "array", "dataset"])
def test_a_zero_weight_dataset_is_never_chosen(kind):
    ds = D.sample_from_datasets([D.from_tensors(-1).repeat(2), D.from_tensors(1).repeat(2)],
                                weights=_weights([0.0, 1.0], kind), stop_on_empty_dataset=True)
    assert [int(x) for x in ds] == [1, 1]


@pytest.mark.parametrize("kind", ["list", "array", "dataset"])
def test_sampling_from_an_empty_dataset_with_stop_gives_nothing(kind):
    ds = D.sample_from_datasets([D.range(0), D.range(1).repeat()], weights=_weights([1.0, 0.0], kind),
                                stop_on_empty_dataset=True)
    assert list(ds) == []


def test_zero_weight_datasets_are_dropped_and_all_zero_weights_give_nothing():
    ds = D.sample_from_datasets([D.from_tensors(-1).repeat(), D.from_tensors(1)], weights=np.asarray([0.0, 1.0]))
    assert [int(x) for x in ds] == [1]
    ds = D.sample_from_datasets([D.from_tensors(-1).repeat(), D.from_tensors(1).repeat()], weights=[0.0, 0.0])
    assert list(ds) == []


def test_cardinality_is_infinite_with_an_infinite_input_and_unknown_otherwise():
    ds = D.sample_from_datasets([D.from_tensors([1.0]).repeat(), D.from_tensors([2.0]).repeat()])
    assert ds.cardinality() == tpsd.INFINITE_CARDINALITY
    assert D.sample_from_datasets([D.range(3), D.range(4)]).cardinality() == tpsd.UNKNOWN_CARDINALITY
    assert D.choose_from_datasets([D.range(3), D.range(4)], D.range(2)).cardinality() == tpsd.UNKNOWN_CARDINALITY


@pytest.mark.parametrize("rerandomize", [None, True, False])
def test_rerandomize_each_iteration_decides_whether_epochs_differ(rerandomize):
    ds = D.sample_from_datasets([D.range(0, 10), D.range(100, 110)], seed=42, weights=[0.5, 0.5],
                                stop_on_empty_dataset=True, rerandomize_each_iteration=rerandomize)
    first, second = [int(x) for x in ds], [int(x) for x in ds]
    assert (first != second) == bool(rerandomize)
    epochs = [int(x) for x in ds.repeat(2)]
    half = len(epochs) // 2
    assert (epochs[:half] != epochs[half:]) == bool(rerandomize)


def test_the_same_seed_gives_the_same_sequence_in_a_new_pipeline():
    def make():
        return D.sample_from_datasets([D.range(0, 50), D.range(100, 150)], seed=3)

    assert [int(x) for x in make()] == [int(x) for x in make()]


def test_invalid_arguments_are_reported_like_tensorflow():
    with pytest.raises(ValueError, match="should have the same length"):
        D.sample_from_datasets([D.range(10), D.range(20)], weights=[0.25, 0.25, 0.25, 0.25])
    with pytest.raises(TypeError, match="`tf.float32` or `tf.float64`"):
        D.sample_from_datasets([D.range(10), D.range(20)], weights=[1, 1])
    with pytest.raises(TypeError, match="must have compatible"):
        D.sample_from_datasets([D.from_tensors(0), D.from_tensors(0.0)])
    with pytest.raises(ValueError, match=r"Invalid `datasets`. `datasets` should not be empty."):
        D.sample_from_datasets(datasets=[], weights=[])
    with pytest.raises(TypeError, match="stop_on_empty_dataset must be a bool"):
        D.sample_from_datasets([D.range(1), D.range(2)], stop_on_empty_dataset="yes")
    with pytest.raises(TypeError, match="seed must be an int"):
        D.sample_from_datasets([D.range(1), D.range(2)], seed=1.5)


def test_sample_from_datasets_resumes_from_every_state():
    ds = D.sample_from_datasets([D.from_tensors(np.int64(i)).repeat() for i in range(2)], [0.5, 0.5],
                                seed=1813).take(100)
    out = assert_iterator_checkpointing(ds, num_checkpoints=None)
    assert len(out) == 100


def test_sampling_exhausted_inputs_with_weights_dataset_resumes_from_every_state():
    ds = D.sample_from_datasets([D.range(30), D.range(100, 140).shuffle(8, seed=1)],
                                weights=D.from_tensors(np.array([0.3, 0.7])).repeat(), seed=5)
    out = assert_iterator_checkpointing(ds, num_checkpoints=None)
    assert sorted(int(x) for x in out) == list(range(30)) + list(range(100, 140))


# -------------------------------------------------------- choose_from_datasets


def test_choose_follows_the_choice_dataset():
    words = [b"foo", b"bar", b"baz"]
    choice = np.random.default_rng(0).integers(3, size=15).astype(np.int64)
    ds = D.choose_from_datasets([D.from_tensors(w).repeat() for w in words], D.from_tensor_slices(choice))
    assert list(ds) == [words[i] for i in choice]


def _foo_bar_baz():
    return [D.from_tensors(b"foo").repeat(2), D.from_tensors(b"bar").repeat(), D.from_tensors(b"baz").repeat()]


def test_choose_stops_or_skips_on_an_exhausted_dataset():
    choice = D.from_tensor_slices(np.asarray([0, 0, 0, 1, 1, 1, 2, 2, 2], dtype=np.int64))
    assert list(D.choose_from_datasets(_foo_bar_baz(), choice, stop_on_empty_dataset=True)) == [b"foo", b"foo"]
    assert list(D.choose_from_datasets(_foo_bar_baz(), choice, stop_on_empty_dataset=False)) == [
        b"foo", b"foo", b"bar", b"bar", b"bar", b"baz", b"baz", b"baz"]
    assert list(D.choose_from_datasets(_foo_bar_baz(), D.range(0), stop_on_empty_dataset=False)) == []


def test_choose_errors_name_the_choice_dataset():
    with pytest.raises(TypeError, match="tf.int64"):
        D.choose_from_datasets([D.from_tensors(0), D.from_tensors(1)], choice_dataset=D.from_tensors(1.0))
    with pytest.raises(TypeError, match="scalar"):
        D.choose_from_datasets([D.from_tensors(0), D.from_tensors(1)], choice_dataset=D.from_tensors([1.0]))
    with pytest.raises(InvalidArgumentError, match="out of range"):
        next(iter(D.choose_from_datasets([D.from_tensors(0)], choice_dataset=D.from_tensors(np.int64(1)))))
    with pytest.raises(ValueError, match=r"Invalid `datasets`. `datasets` should not be empty."):
        D.choose_from_datasets(datasets=[], choice_dataset=D.from_tensors(1.0))
    with pytest.raises(TypeError, match=r"`choice_dataset` should be a `tf.data.Dataset`"):
        D.choose_from_datasets([D.range(42)], choice_dataset=None)


def test_choose_from_datasets_resumes_from_every_state():
    indices = np.random.default_rng([1, 2]).permutation(np.repeat(np.arange(5), 20)).astype(np.int64)
    ds = D.choose_from_datasets([D.range(20) for _ in range(5)], D.from_tensor_slices(indices))
    out = assert_iterator_checkpointing(ds, num_checkpoints=None)
    assert len(out) == 100 and sorted(int(x) for x in out) == sorted(list(range(20)) * 5)


# ------------------------------------------------------------ counter / random


@pytest.mark.parametrize(("start", "step", "expected"), [(3, 4, [3, 7, 11]), (0, -1, [0, -1, -2])])
def test_counter_counts_from_start_by_step(start, step, expected):
    ds = D.counter(start, step)
    assert ds.element_spec == tpsd.TensorSpec((), np.int64)
    assert [int(x) for x in ds.take(3)] == expected
    assert ds.cardinality() == tpsd.INFINITE_CARDINALITY
    assert next(iter(D.counter(5, 2).batch(3))).tolist() == [5, 7, 9]


def test_counter_resumes_and_rejects_a_float_step():
    assert_iterator_checkpointing(D.counter(10, 3).take(50), num_checkpoints=None)
    with pytest.raises(TypeError, match="Dataset.counter: step must be an int"):
        D.counter(0, 0.5)


@pytest.mark.parametrize("seed", [None, 20])
def test_random_is_deterministic_exactly_when_seeded(seed):
    a = [int(x) for x in D.random(seed=seed).take(10)]
    b = [int(x) for x in D.random(seed=seed).take(10)]
    assert (a == b) == (seed is not None)
    assert all(0 <= x < 2**32 for x in a)


@pytest.mark.parametrize("rerandomize", [None, True, False])
def test_random_rerandomizes_epochs_only_when_asked(rerandomize):
    ds = D.random(seed=42, rerandomize_each_iteration=rerandomize).take(10)
    first, second = [int(x) for x in ds], [int(x) for x in ds]
    assert (first == second) == (not rerandomize)
    it = iter(ds.repeat(2))
    epochs = [int(next(it)) for _ in range(20)]
    assert (epochs[:10] == epochs[10:]) == (not rerandomize)
    assert [int(x) for x in D.random(seed=42).take(1).map(lambda _: 42)] == [42]


def test_random_values_are_uniform_over_32_bits():
    values = np.array([int(x) for x in D.random(seed=1).take(20000)])
    hist = np.bincount(values >> 28, minlength=16) / len(values)
    assert _chi2(np.full(16, 1 / 16), hist) < 1e-2


@pytest.mark.parametrize("rerandomize", [True, False])
def test_random_resumes_from_every_state(rerandomize):
    assert_iterator_checkpointing(D.random(seed=55, rerandomize_each_iteration=rerandomize).take(10),
                                  num_checkpoints=None)
    assert_iterator_checkpointing(D.random().take(3000), num_checkpoints=20)


def test_restoring_late_in_the_stream_costs_no_more_than_early():
    calls = []

    def counted(x):
        calls.append(1)
        return x

    def make():
        return D.sample_from_datasets([D.range(10**7).map(counted), D.range(10**7).map(counted)], seed=9)

    it = iter(make())
    for _ in range(20000):
        next(it)
    state = it.get_state()
    expected = [int(next(it)) for _ in range(50)]
    calls.clear()
    fresh = iter(make())
    fresh.set_state(state)
    assert [int(next(fresh)) for _ in range(50)] == expected
    assert len(calls) < 600  # a chunk per input at most, not the 20,000 elements before the state
