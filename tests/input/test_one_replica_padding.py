"""One replica: distributed datasets give the whole batch as plain arrays, with every InputOptions.

TensorFlow's one-replica strategies (``OneDeviceStrategy``, ``MirroredStrategy`` on one
device, a one-core TPU) yield each batch unwrapped; ``partial_batch`` keeps its meaning:
``"pad"`` pads the last batch to the global batch size and adds the mask, ``"drop"``
drops it, ``"ragged"`` yields it as it is.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd


def _one_replica_strategies():
    return [tps.OneDeviceStrategy(jax.devices()[0]), tps.MirroredStrategy(devices=jax.devices()[:1])]


def _dataset():
    x = np.arange(10, dtype=np.float32).reshape(10, 1)
    y = np.arange(10, dtype=np.int32)
    return tpsd.Dataset.from_tensor_slices((x, y)).batch(4)  # 4, 4, then 2


@pytest.mark.parametrize("strategy", _one_replica_strategies(), ids=["one-device", "mirrored-on-one"])
def test_pad_gives_the_padded_batch_and_its_mask(strategy):
    dist = strategy.experimental_distribute_dataset(_dataset(), tps.InputOptions(partial_batch="pad"))
    got = [((np.asarray(x), np.asarray(y)), np.asarray(m)) for (x, y), m in dist]
    assert len(got) == 3
    for (x, y), mask in got:
        assert x.shape == (4, 1) and y.shape == (4,) and mask.shape == (4,) and mask.dtype == bool
    (x, y), mask = got[-1]
    assert mask.tolist() == [True, True, False, False]
    assert x[:, 0].tolist() == [8, 9, 0, 0] and y.tolist() == [8, 9, 0, 0]
    seen = [int(v) for (_, y), m in got for v, keep in zip(y, m) if keep]
    assert seen == list(range(10))


@pytest.mark.parametrize("strategy", _one_replica_strategies(), ids=["one-device", "mirrored-on-one"])
def test_drop_drops_the_partial_batch(strategy):
    dist = strategy.experimental_distribute_dataset(_dataset(), tps.InputOptions(partial_batch="drop"))
    ys = [np.asarray(y).tolist() for _, y in dist]
    assert ys == [[0, 1, 2, 3], [4, 5, 6, 7]]


@pytest.mark.parametrize("strategy", _one_replica_strategies(), ids=["one-device", "mirrored-on-one"])
def test_ragged_yields_every_batch_as_it_is(strategy):
    dist = strategy.experimental_distribute_dataset(_dataset())
    ys = [np.asarray(y).tolist() for _, y in dist]
    assert ys == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    for x, _ in dist:
        assert isinstance(x, jax.Array) and not isinstance(x, tps.PerReplica)


def test_a_padded_batch_feeds_a_compiled_step_that_counts_each_example_once():
    strategy = tps.OneDeviceStrategy(jax.devices()[0])
    dist = strategy.experimental_distribute_dataset(_dataset(), tps.InputOptions(partial_batch="pad"))

    def count(batch, mask):
        _, y = batch
        return jax.numpy.sum(jax.numpy.where(mask, y, 0)), jax.numpy.sum(mask)

    total = n = 0
    for batch, mask in dist:
        s, c = strategy.run(count, (batch, mask))
        total, n = total + int(s), n + int(c)
    assert (total, n) == (45, 10)


def test_the_element_spec_of_a_padded_one_replica_dataset_is_plain():
    strategy = tps.OneDeviceStrategy(jax.devices()[0])
    dist = strategy.experimental_distribute_dataset(_dataset(), tps.InputOptions(partial_batch="pad"))
    (x_spec, y_spec), mask_spec = dist.element_spec
    assert tuple(x_spec.shape) == (4, 1) and tuple(mask_spec.shape) == (4,)
