"""tps.metrics under strategies: every replica's examples count once, in every context.

The reference is always the same metric fed the whole global batch with no
strategy. Replica r gets piece r of the batch (``np.array_split``: ragged
pieces when the batch does not divide evenly, empty ones when it is small).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps

RNG = np.random.default_rng(0)
LABELS = RNG.integers(0, 5, size=(40,)).astype(np.int32)
SCORES = RNG.normal(size=(40, 5)).astype(np.float32)
LOSSES = RNG.uniform(size=(40,)).astype(np.float32)
WEIGHTS = RNG.integers(0, 3, size=(40,)).astype(np.float32)


def _split(strategy: tps.Strategy, a: np.ndarray) -> tps.PerReplica:
    """Piece r of ``a`` for replica r, one piece per replica of ``strategy`` (8, or 1 on --devices 1)."""
    return tps.PerReplica(list(np.array_split(a, strategy.num_replicas_in_sync)))


def _reference(make, *updates):
    metric = make()
    for args in updates:
        metric.update_state(*args[:-1], sample_weight=args[-1])
    return float(metric.result())


def _batch(n_examples: int):
    return LOSSES[:n_examples], LABELS[:n_examples], SCORES[:n_examples], WEIGHTS[:n_examples]


def _metrics(strategy):
    with strategy.scope():
        return (tps.metrics.Mean(), tps.metrics.SparseCategoricalAccuracy(),
                tps.metrics.CategoricalAccuracy(), tps.metrics.MeanSquaredError())


def _step(mean, sparse, categorical, mse):
    def step(losses, labels, scores, weights):
        mean.update_state(losses, sample_weight=weights)
        sparse.update_state(labels, scores, sample_weight=weights)
        categorical.update_state(jax.nn.one_hot(labels, 5), scores)
        mse.update_state(jax.nn.one_hot(labels, 5), scores, sample_weight=weights)
        return mean.result(), sparse.result()

    return step


def _expected(*batches):
    def ref(make, fn):
        return _reference(make, *[fn(*b) for b in batches])

    return [
        ref(tps.metrics.Mean, lambda lo, la, sc, w: (lo, w)),
        ref(tps.metrics.SparseCategoricalAccuracy, lambda lo, la, sc, w: (la, sc, w)),
        ref(tps.metrics.CategoricalAccuracy, lambda lo, la, sc, w: (np.eye(5)[la], sc, None)),
        ref(tps.metrics.MeanSquaredError, lambda lo, la, sc, w: (np.eye(5)[la], sc, w)),
    ]


def _results(metrics):
    return [float(m.result()) for m in metrics]


@pytest.mark.parametrize("n_examples", [40, 13, 5], ids=["even", "ragged", "fewer_than_replicas"])
def test_updates_inside_run_equal_the_metric_of_the_whole_batch(path, n_examples):
    strategy = tps.MirroredStrategy()
    metrics = _metrics(strategy)
    batch = _batch(n_examples)
    strategy.run(_step(*metrics), args=tuple(_split(strategy, a) for a in batch))
    np.testing.assert_allclose(_results(metrics), _expected(batch), rtol=1e-6)


def test_result_inside_a_replica_function_is_the_global_result_on_every_replica(path):
    strategy = tps.MirroredStrategy()
    metrics = _metrics(strategy)
    batch = _batch(40)
    means, accuracies = strategy.run(_step(*metrics), args=tuple(_split(strategy, a) for a in batch))
    expected = _expected(batch)
    for value in strategy.experimental_local_results(means):
        assert float(value) == pytest.approx(expected[0], rel=1e-6)
    for value in strategy.experimental_local_results(accuracies):
        assert float(value) == pytest.approx(expected[1], rel=1e-6)


def test_updates_inside_tps_function_accumulate_over_calls():
    strategy = tps.MirroredStrategy()
    metrics = _metrics(strategy)
    step = _step(*metrics)

    @tps.function
    def distributed_step(*batch):
        return strategy.run(step, args=batch)

    first, second = _batch(40), tuple(a[::-1].copy() for a in _batch(40))
    distributed_step(*(_split(strategy, a) for a in first))
    distributed_step(*(_split(strategy, a) for a in second))
    np.testing.assert_allclose(_results(metrics), _expected(first, second), rtol=1e-6)


def test_result_read_inside_tps_function_is_the_global_result():
    strategy = tps.MirroredStrategy()
    metrics = _metrics(strategy)
    step = _step(*metrics)

    @tps.function
    def distributed_step(*batch):
        strategy.run(step, args=batch)
        return metrics[0].result(), metrics[1].result()

    batch = _batch(40)
    mean, accuracy = distributed_step(*(_split(strategy, a) for a in batch))
    expected = _expected(batch)
    assert float(mean) == pytest.approx(expected[0], rel=1e-6)
    assert float(accuracy) == pytest.approx(expected[1], rel=1e-6)


def test_a_ragged_last_batch_inside_tps_function_counts_every_example_once():
    strategy = tps.MirroredStrategy()
    metrics = _metrics(strategy)
    step = _step(*metrics)

    @tps.function
    def distributed_step(*batch):
        return strategy.run(step, args=batch)

    full, partial = _batch(40), _batch(13)
    distributed_step(*(_split(strategy, a) for a in full))
    distributed_step(*(_split(strategy, a) for a in partial))
    np.testing.assert_allclose(_results(metrics), _expected(full, partial), rtol=1e-6)


def test_a_distributed_dataset_epoch_with_a_partial_last_batch_counts_every_example():
    import tpustrategy.data as tpsd

    strategy = tps.MirroredStrategy()
    metrics = _metrics(strategy)
    step = _step(*metrics)
    dataset = tpsd.Dataset.from_tensor_slices(_batch(37)).batch(16)  # 16, 16, 5
    for batch in strategy.experimental_distribute_dataset(dataset):
        strategy.run(step, args=batch)
    np.testing.assert_allclose(_results(metrics), _expected(_batch(37)), rtol=1e-6)


def test_cross_replica_updates_add_to_what_the_replicas_accumulated():
    strategy = tps.MirroredStrategy()
    metrics = _metrics(strategy)
    batch, extra = _batch(40), _batch(7)
    strategy.run(_step(*metrics), args=tuple(_split(strategy, a) for a in batch))
    with strategy.scope():
        _step(*metrics)(*extra)
    _step(*metrics)(*extra)  # outside the scope too: the variables bring their strategy
    np.testing.assert_allclose(_results(metrics), _expected(batch, extra, extra), rtol=1e-6)


def test_cross_replica_updates_inside_tps_function_outside_run():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        mean = tps.metrics.Mean()

    @tps.function
    def add(values):
        mean.update_state(values)
        return mean.result()

    assert float(add(jnp.asarray([1.0, 2.0]))) == 1.5
    assert float(add(jnp.asarray([6.0]))) == 3.0


def test_cross_replica_updates_with_three_replicas_keep_keras_numbers():
    strategy = tps.MirroredStrategy(jax.devices()[:3])
    with strategy.scope():
        mean = tps.metrics.Mean()
    for values in ([0.1, 0.2, 0.7], [1.0 / 3.0], [5.0, 5.0]):
        mean.update_state(values)
    assert float(mean.result()) == pytest.approx((0.1 + 0.2 + 0.7 + 1 / 3 + 10) / 6, rel=1e-6)


def test_reset_state_zeroes_every_replica_component(path):
    strategy = tps.MirroredStrategy()
    metrics = _metrics(strategy)
    batch = _batch(40)
    strategy.run(_step(*metrics), args=tuple(_split(strategy, a) for a in batch))
    for m in metrics:
        m.reset_state()
    for m in metrics:
        assert float(m.result()) == 0.0
        for v in m.variables:
            assert [float(c) for c in strategy.experimental_local_results(v)] == [0.0] * strategy.num_replicas_in_sync
    strategy.run(_step(*metrics), args=tuple(_split(strategy, a) for a in batch))
    np.testing.assert_allclose(_results(metrics), _expected(batch), rtol=1e-6)


def test_reset_state_inside_a_replica_function_zeroes_every_component(path):
    strategy = tps.MirroredStrategy()
    metrics = _metrics(strategy)
    batch = tuple(_split(strategy, a) for a in _batch(40))
    strategy.run(_step(*metrics), args=batch)

    def reset_then_step(*b):
        for m in metrics:
            m.reset_state()
        return _step(*metrics)(*b)

    strategy.run(reset_then_step, args=batch)
    np.testing.assert_allclose(_results(metrics), _expected(_batch(40)), rtol=1e-6)


def test_a_metric_created_without_a_strategy_works_in_eager_code_and_tps_function():
    mean = tps.metrics.Mean()

    @tps.function
    def add(values):
        mean.update_state(values)

    mean.update_state([1.0, 2.0])
    add(jnp.asarray([3.0, 4.0, 5.0]))
    assert float(mean.result()) == 3.0
    assert mean.variables[0].strategy is None


@pytest.mark.parametrize("make", [
    pytest.param(lambda: tps.OneDeviceStrategy("/cpu:0"), id="OneDeviceStrategy"),
    pytest.param(lambda: tps.MirroredStrategy(jax.devices()[:1]), id="Mirrored_one_device"),
])
def test_one_replica_strategies_give_the_single_device_result(make):
    strategy = make()
    metrics = _metrics(strategy)
    batch = _batch(13)
    strategy.run(_step(*metrics), args=batch)
    with strategy.scope():
        _step(*metrics)(*batch)
    np.testing.assert_allclose(_results(metrics), _expected(batch, batch), rtol=1e-6)


@pytest.mark.parametrize("make", [
    pytest.param(lambda: tps.OneDeviceStrategy("/cpu:0"), id="OneDeviceStrategy"),
    pytest.param(lambda: tps.MirroredStrategy(jax.devices()[:1]), id="Mirrored_one_device"),
])
def test_one_replica_strategies_inside_tps_function_give_the_single_device_result(make):
    strategy = make()
    metrics = _metrics(strategy)
    step = _step(*metrics)

    @tps.function
    def distributed_step(*batch):
        return strategy.run(step, args=batch)

    batch = _batch(13)
    distributed_step(*batch)
    distributed_step(*batch)
    np.testing.assert_allclose(_results(metrics), _expected(batch, batch), rtol=1e-6)


class _CountPositives(tps.metrics.Metric):
    """A user-defined metric in Keras's style: state from add_weight, a result from it."""

    def __init__(self, name="count_positives"):
        super().__init__(name=name)
        self.positives = self.add_weight(name="positives", shape=(2,), initializer="zeros")

    def update_state(self, values, sample_weight=None):
        values = jnp.asarray(values, jnp.float32)
        self.positives.assign_add(jnp.stack([jnp.sum(values > 0), jnp.sum(values <= 0)]).astype(jnp.float32))

    def result(self):
        return self.read_state(self.positives)


def test_a_custom_metric_built_with_add_weight_counts_every_replica(path):
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        metric = _CountPositives()
    values = LOSSES[:13] - 0.5
    results = strategy.run(lambda v: (metric.update_state(v), metric.result())[1], args=(_split(strategy, values),))
    expected = [float(np.sum(values > 0)), float(np.sum(values <= 0))]
    assert np.asarray(metric.result()).tolist() == expected
    for r in strategy.experimental_local_results(results):
        assert np.asarray(r).tolist() == expected
    assert metric.positives.synchronization is tps.VariableSynchronization.ON_READ
