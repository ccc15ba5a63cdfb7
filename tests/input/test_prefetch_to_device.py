"""`tpsd.experimental.prefetch_to_device` / `copy_to_device`: elements placed on the named device.

TensorFlow's `prefetch_to_device(device, buffer_size)` is `copy_to_device(device)` followed by
`prefetch(buffer_size)`: the elements come out on that device, the strings on the host. Here the
numeric leaves become `jax.Array`s on the resolved device; values, order, checkpoints and
distribution are those of the same pipeline without the device copy.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tpustrategy._src.data.transformations.prefetch import PrefetchDataset
from tpustrategy._src.input.device_prefetch import CopyToDeviceDataset

X = tpsd.experimental


def _pipeline():
    return tpsd.Dataset.from_tensor_slices(
        {"x": np.arange(24, dtype=np.float32).reshape(12, 2), "name": np.array([b"r%d" % i for i in range(12)])}
    ).batch(4)


def _last_device():
    return jax.devices()[-1]


def test_elements_live_on_the_named_device_and_keep_their_values():
    device = _last_device()
    ds = _pipeline().apply(X.prefetch_to_device(f"/cpu:{device.id}"))
    got = list(ds)
    assert len(got) == 3
    for k, element in enumerate(got):
        assert isinstance(element["x"], jax.Array)
        assert element["x"].devices() == {device}
        np.testing.assert_array_equal(np.asarray(element["x"]), np.arange(8 * k, 8 * k + 8).reshape(4, 2))
        # Strings stay host NumPy arrays (TensorFlow keeps string tensors on the CPU).
        assert isinstance(element["name"], np.ndarray)
        assert list(element["name"]) == [b"r%d" % i for i in range(4 * k, 4 * k + 4)]


def test_prefetch_to_device_is_copy_then_prefetch_with_two_by_default():
    ds = _pipeline().apply(X.prefetch_to_device("/cpu:0"))
    assert isinstance(ds, PrefetchDataset) and ds.buffer_size == 2
    assert isinstance(ds.inputs[0], CopyToDeviceDataset)
    assert _pipeline().apply(X.prefetch_to_device("/cpu:0", buffer_size=5)).buffer_size == 5
    assert ds.element_spec == _pipeline().element_spec
    assert ds.cardinality() == 3


def test_copy_to_device_accepts_jax_devices_and_tensorflow_spellings():
    device = _last_device()
    for spec in (device, f"/device:CPU:{device.id}", f"/job:localhost/replica:0/task:0/device:CPU:{device.id}"):
        (first,) = list(tpsd.Dataset.range(1).apply(X.copy_to_device(spec)))
        assert first.devices() == {device}
        assert int(first) == 0


def test_a_device_that_does_not_exist_is_named_when_the_pipeline_is_built():
    count = len(jax.devices("cpu"))
    with pytest.raises(ValueError, match=rf"copy_to_device: `target_device`: device '/cpu:{count}' does not exist"):
        tpsd.Dataset.range(3).apply(X.prefetch_to_device(f"/cpu:{count}"))
    with pytest.raises(ValueError, match="cannot interpret 'gpu zero' as a device"):
        tpsd.Dataset.range(3).apply(X.copy_to_device("gpu zero"))


def test_iterator_checkpoint_resumes_exactly_through_the_device_prefetch():
    ds = tpsd.Dataset.range(20).batch(3).apply(X.prefetch_to_device("/cpu:0"))
    it = iter(ds)
    first = [np.asarray(next(it)).tolist() for _ in range(2)]
    ckpt = tps.train.Checkpoint(it=it)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = ckpt.write(f"{tmp}/ckpt")
        rest = [np.asarray(x).tolist() for x in it]
        it2 = iter(ds)
        tps.train.Checkpoint(it=it2).read(path)
        assert [np.asarray(x).tolist() for x in it2] == rest
    assert first + rest == [list(range(i, min(i + 3, 20))) for i in range(0, 20, 3)]


def test_a_distributed_dataset_places_batches_itself():
    strategy = tps.MirroredStrategy()
    n = strategy.num_replicas_in_sync
    plain = strategy.experimental_distribute_dataset(tpsd.Dataset.range(4 * n).batch(2 * n))
    placed = strategy.experimental_distribute_dataset(
        tpsd.Dataset.range(4 * n).batch(2 * n).apply(X.prefetch_to_device("/cpu:0")))
    for a, b in zip(plain, placed, strict=True):
        ra = [np.asarray(v) for v in strategy.experimental_local_results(a)]
        rb = [np.asarray(v) for v in strategy.experimental_local_results(b)]
        assert [r.tolist() for r in ra] == [r.tolist() for r in rb]
        assert [v.devices() for v in strategy.experimental_local_results(b)] == [
            {d} for d in strategy.extended.worker_devices]
