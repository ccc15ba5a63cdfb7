"""A Keras metric's sync-on-read state read back after a cross-replica assign.

tf.keras's rule: assigning a sync-on-read variable in cross-replica context spreads the
value over the replicas so that reading it back gives the value. Keras assigns its
metrics' state that way at every epoch (``reset_state``, the state sync at the epoch's
end) and reads it right after (the first step, ``result()``): the read gives the value
assigned without running the aggregate program again.
"""

import keras
import numpy as np

import tpustrategy as tps
from tpustrategy._src.keras import variables as keras_variables


def _count_programs(monkeypatch):
    made = []
    real = keras_variables._program

    def counting(state, kind):
        fn = real(state, kind)

        def call(value):
            made.append(kind)
            return fn(value)

        return call

    monkeypatch.setattr(keras_variables, "_program", counting)
    return made


def test_a_read_after_a_cross_replica_assign_gives_the_value_without_an_aggregate_program(monkeypatch):
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        mean = keras.metrics.Mean()
    mean.update_state(np.array([1.0, 2.0, 6.0], "float32"))
    total, count = mean.variables
    made = _count_programs(monkeypatch)
    total.assign(7.5)
    count.assign(3.0)
    assert float(mean.result()) == 2.5
    assert float(np.asarray(total.value)) == 7.5
    assert made == ["spread", "spread"]
    mean.reset_state()
    assert float(mean.result()) == 0.0
    assert made == ["spread"] * 4
    # the copies on the replicas still aggregate to the value (what a compiled step reads)
    per_replica = np.asarray(total._value)
    assert per_replica.shape == (strategy.num_replicas_in_sync,)
    assert float(per_replica.sum()) == 0.0


def test_a_read_after_a_replica_update_still_aggregates_the_replicas():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        mean = keras.metrics.Mean()

    @tps.function
    def step():
        def replica():
            ctx = tps.get_replica_context()
            mean.update_state(ctx.replica_id_in_sync_group * 1.0 + 1.0)

        strategy.run(replica)

    step()
    r = strategy.num_replicas_in_sync
    assert float(mean.result()) == sum(range(1, r + 1)) / r
    mean.reset_state()
    step()
    assert float(mean.result()) == sum(range(1, r + 1)) / r
