"""TensorFlow's rejection_resample_test, ported (distributions checked, as TF's test does)."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.testing import assert_iterator_checkpointing

D = tpsd.Dataset


@pytest.mark.parametrize("initial_known", [True, False])
def test_resampled_classes_follow_the_target_distribution(initial_known):
    classes = np.random.default_rng(0).integers(5, size=10000).astype(np.int64)
    target = [0.9, 0.05, 0.05, 0.0, 0.0]
    ds = (D.from_tensor_slices(classes).shuffle(200, seed=21)
          .map(lambda c: (c, str(int(c)).encode())).repeat())
    it = iter(ds.rejection_resample(target_dist=target, initial_dist=[0.2] * 5 if initial_known else None,
                                    class_func=lambda c, _: c, seed=27))
    returned = [next(it) for _ in range(2000)]
    got_classes = [int(c) for c, _ in returned]
    assert [str(c).encode() for c in got_classes] == [data for _, (_, data) in returned]
    dist = np.bincount(got_classes, minlength=5) / len(got_classes)
    np.testing.assert_allclose(dist, target, atol=1e-2)
    assert isinstance(returned[0][0], np.int64)


@pytest.mark.parametrize("only_initial", [True, False])
def test_edge_cases_end_with_the_input(only_initial):
    data = np.random.default_rng(1).choice(2, 100, p=[0.5, 0.5])
    ds = D.from_tensor_slices(data).rejection_resample(
        class_func=lambda x: x, target_dist=[0.5, 0.5] if only_initial else [0.0, 1.0], initial_dist=[0.5, 0.5])
    out = list(ds)
    if only_initial:
        assert [int(x) for _, x in out] == data.tolist()
    else:
        assert out and all(int(c) == 1 for c, _ in out)


def test_a_dirac_target_keeps_only_that_class():
    data = np.random.default_rng(2).choice(4, 100)
    ds = D.from_tensor_slices(data).map(lambda x: np.int32(np.random.randint(4)))
    out = list(ds.rejection_resample(class_func=lambda x: x, target_dist=[0, 0, 0, 1.0], initial_dist=[0.25] * 4))
    assert out and all(int(c) == 3 for c, _ in out)


def test_exhaustion_ends_the_stream_with_the_target_mix():
    ds = D.range(10000).rejection_resample(class_func=lambda x: x % 2, target_dist=[0.9, 0.1],
                                           initial_dist=[0.5, 0.5], seed=3)
    classes = [int(c) for c, _ in ds]
    np.testing.assert_allclose(np.bincount(classes, minlength=2) / len(classes), [0.9, 0.1], atol=1e-2)


@pytest.mark.parametrize(("target_dtype", "init_dtype"), [("float32", "float64"), ("float64", "float32"),
                                                          ("float64", "float64"), ("float64", None)])
def test_other_dtypes_of_the_distributions(target_dtype, init_dtype):
    init = None if init_dtype is None else np.array([0.5, 0.5], dtype=init_dtype)
    ds = D.range(10).rejection_resample(class_func=lambda x: x % 2, target_dist=np.array([0.5, 0.5], target_dtype),
                                        initial_dist=init)
    c, x = next(iter(ds))
    assert int(c) == int(x) % 2


@pytest.mark.parametrize("initial", [None, [0.5, 0.5]])
def test_rejection_resample_resumes_from_every_state(initial):
    ds = D.range(300).rejection_resample(class_func=lambda x: x % 2, target_dist=[0.8, 0.2],
                                         initial_dist=initial, seed=4)
    assert_iterator_checkpointing(ds, num_checkpoints=40)


def test_bad_distributions_and_classes_name_the_argument():
    with pytest.raises(ValueError, match="initial_dist must be a 1-D list .* of length 2"):
        D.range(3).rejection_resample(lambda x: x % 2, [0.5, 0.5], initial_dist=[1.0])
    with pytest.raises(ValueError, match="target_dist must be finite and non-negative"):
        D.range(3).rejection_resample(lambda x: x % 2, [1.5, -0.5])
    with pytest.raises(ValueError, match="outside"):
        list(D.range(3).rejection_resample(lambda x: x, [0.5, 0.5], initial_dist=[0.5, 0.5]))
    ds = tpsd.experimental.rejection_resample(lambda x: x % 2, [0.5, 0.5], seed=1)(D.range(4))
    assert len(list(ds)) >= 1
