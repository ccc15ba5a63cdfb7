"""Per-pipeline input without a batch(): each element is split over every replica of the job (TF's legacy rebatch)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tpustrategy._src.input.distributed import DistributedDataset

pytestmark = pytest.mark.devices(4)  # each element split over four replicas


def _unbatched(policy):
    # input_lib_test's dataset: range(12).batch(8) made without a batch() (elements of 8 and 4 examples).
    ds = tpsd.Dataset.range(2).map(lambda i: np.arange(8 * int(i), 8 * int(i) + (8 if int(i) == 0 else 4)))
    options = tpsd.Options()
    options.experimental_distribute.auto_shard_policy = policy
    return ds.with_options(options)


def _steps(iterator):
    return [[np.asarray(v).tolist() for v in step.values] for step in iterator]


@pytest.mark.parametrize("pipeline", [0, 1])
def test_auto_shard_off_on_two_pipelines_splits_each_element_over_all_four_replicas(pipeline):
    strategy = tps.MirroredStrategy(jax.devices()[:4])
    dist = DistributedDataset(strategy, _unbatched(tpsd.AutoShardPolicy.OFF), input_pipeline=(pipeline, 2))
    # Each element in 4 pieces; this pipeline's 2 replicas take 2 per step: 4 steps (TensorFlow), not 2.
    assert _steps(iter(dist)) == [[[0, 1], [2, 3]], [[4, 5], [6, 7]], [[8], [9]], [[10], [11]]]


def test_a_state_taken_inside_a_split_element_resumes_at_the_next_step():
    strategy = tps.MirroredStrategy(jax.devices()[:4])
    dist = DistributedDataset(strategy, _unbatched(tpsd.AutoShardPolicy.OFF), input_pipeline=(0, 2))
    it = iter(dist)
    next(it)
    state = it.get_state()
    resumed = iter(dist)
    resumed.set_state(state)
    assert _steps(resumed) == [[[4, 5], [6, 7]], [[8], [9]], [[10], [11]]]
    assert _steps(it) == [[[4, 5], [6, 7]], [[8], [9]], [[10], [11]]]


def test_one_pipeline_still_splits_each_element_once():
    strategy = tps.MirroredStrategy(jax.devices()[:4])
    dist = strategy.experimental_distribute_dataset(_unbatched(tpsd.AutoShardPolicy.OFF))
    assert _steps(iter(dist)) == [[[0, 1], [2, 3], [4, 5], [6, 7]], [[8], [9], [10], [11]]]
