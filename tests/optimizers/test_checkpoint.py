"""Optimizer and metric state round-trips through tps.train.Checkpoint, as in the tutorial."""

from __future__ import annotations

import numpy as np

import tpustrategy as tps


class _Model:
    def __init__(self):
        self.kernel = tps.Variable(np.ones(3, np.float32), name="kernel")


def _objects(strategy):
    with strategy.scope():
        model = _Model()
        optimizer = tps.optimizers.Adam(0.1)
        metric = tps.metrics.Mean(name="train_loss")
    return model, optimizer, metric


def _step(strategy, model, optimizer, metric):
    def step(g):
        optimizer.apply_gradients([(g, model.kernel)])
        metric.update_state(g)

    # Replica r's gradient is r + 1 everywhere: never all zeros, even with one replica.
    grads = tps.PerReplica([np.full(3, r + 1, np.float32) for r in range(strategy.num_replicas_in_sync)])
    strategy.run(step, args=(grads,))


def test_training_resumed_from_a_checkpoint_continues_exactly(tmp_path):
    strategy = tps.MirroredStrategy()
    model, optimizer, metric = _objects(strategy)
    _step(strategy, model, optimizer, metric)
    path = tps.train.Checkpoint(optimizer=optimizer, model=model, metric=metric).save(tmp_path / "ckpt")
    _step(strategy, model, optimizer, metric)

    restored = _objects(strategy)
    restored[1].build([restored[0].kernel])  # the state must exist to be restored into (as in Keras 3)
    status = tps.train.Checkpoint(optimizer=restored[1], model=restored[0], metric=restored[2]).restore(path)
    status.assert_consumed()
    assert int(restored[1].iterations) == 1
    _step(strategy, *restored)
    np.testing.assert_array_equal(restored[0].kernel.numpy(), model.kernel.numpy())
    for a, b in zip(restored[1].variables, optimizer.variables):
        np.testing.assert_array_equal(np.asarray(a.read_value()), np.asarray(b.read_value()))
    n = strategy.num_replicas_in_sync
    assert float(restored[2].result()) == float(metric.result()) == (n + 1) / 2  # the mean of 1..n
