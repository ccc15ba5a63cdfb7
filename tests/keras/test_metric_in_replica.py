"""``metric.result()`` inside a replica function is the cross-replica value (tf.keras under a strategy).

tf.keras computes a metric's result in cross-replica context (a merge call) also when
``result()`` is called in a replica function, so every replica sees the total over all
replicas, and the value can be assigned to a mirrored variable (it is equal everywhere).
"""

import keras
import numpy as np

import tpustrategy as tps
import tpustrategy.data as tpsd

VALUES = np.arange(16, dtype="float32")
LABELS = (np.arange(16) % 3).astype("int32")
LOGITS = np.eye(3, dtype="float32")[np.arange(16) % 2]   # right where i % 2 == i % 3


def test_mean_and_accuracy_results_in_a_replica_function_are_the_totals_over_all_replicas():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        mean = keras.metrics.Mean()
        accuracy = keras.metrics.SparseCategoricalAccuracy()
        best = tps.Variable(0.0)                     # mirrored, aggregation NONE
        seen = keras.Variable(0.0, trainable=False)  # a Keras variable of the strategy

    def step(inputs):
        values, labels, logits = inputs
        mean.update_state(values)
        accuracy.update_state(labels, logits)
        total = mean.result()
        best.assign(total)
        seen.assign(accuracy.result())
        return total, accuracy.result()

    @tps.function
    def run(inputs):
        return strategy.run(step, args=(inputs,))

    ds = tpsd.Dataset.from_tensor_slices((VALUES, LABELS, LOGITS)).batch(16)
    got_mean, got_acc = run(next(iter(strategy.experimental_distribute_dataset(ds))))
    want_acc = float(np.mean(LABELS == np.arange(16) % 2))
    for replica_value in strategy.experimental_local_results(got_mean):
        np.testing.assert_allclose(float(replica_value), VALUES.mean(), rtol=1e-6)
    for replica_value in strategy.experimental_local_results(got_acc):
        np.testing.assert_allclose(float(replica_value), want_acc, rtol=1e-6)
    np.testing.assert_allclose(float(best.numpy()), VALUES.mean(), rtol=1e-6)
    np.testing.assert_allclose(float(seen.numpy()), want_acc, rtol=1e-6)
    np.testing.assert_allclose(float(mean.result()), VALUES.mean(), rtol=1e-6)   # and in cross-replica context
