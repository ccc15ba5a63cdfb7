"""A Keras metric's sync-on-read state read back after a cross-replica assign.

tf.keras's rule: assigning a sync-on-read variable in cross-replica context spreads the
value over the replicas so that reading it back gives the value. Keras assigns its
metrics' state that way at every epoch (``reset_state``, the state sync at the epoch's
end) and reads it right after (the first step, ``result()``): the read gives the value
assigned without running the aggregate program again.
"""

import keras
import numpy as np
import pytest

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
    assert made == []  # small values are spread on the host: no program at all
    mean.reset_state()
    assert float(mean.result()) == 0.0
    assert made == []
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


@pytest.mark.devices(3)  # three replicas' copies: a share of 1/3 is inexact
def test_the_host_spread_gives_the_spread_program_s_copies(monkeypatch):
    """Each aggregation rule and dtype: the copies made on the host are the program's (a float
    share within one rounding: the host's is the correctly rounded ``value / n``), and a value
    too large for the host runs the program. Also: a sync-on-read variable made from a concrete
    value keeps the value's shape (not its storage's, one copy per replica)."""
    strategy = tps.MirroredStrategy([f"/cpu:{i}" for i in range(3)])  # n = 3: 1/3 is inexact
    with strategy.scope():
        cases = [
            (keras.Variable(np.zeros(4, "float32"), synchronization="on_read", aggregation="sum"),
             np.array([1.0, 2.0, 1e-7, 7.0], "float32")),
            (keras.Variable(np.zeros(4, "int32"), synchronization="on_read", aggregation="sum",
                            trainable=False), np.array([1, 2, 3, 4], "int32")),
            (keras.Variable(np.zeros(2, "float32"), synchronization="on_read", aggregation="mean"),
             np.array([0.1, 0.7], "float32")),
            (keras.Variable(np.zeros(2, "float16"), synchronization="on_read", aggregation="sum"),
             np.array([0.1, 5.0], "float16")),
        ]
    for var, value in cases:
        assert var.shape == value.shape, (var.path, var.shape)
        state = keras_variables.state_of(var)
        want = np.asarray(keras_variables._program(state, "spread")(value))
        var.assign(value)
        got = np.asarray(var._value)
        assert got.dtype == want.dtype and got.shape == (3, *value.shape), (var.path, got)
        if got.dtype.kind == "f":  # the host divides correctly rounded; XLA may multiply by 1/n
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=float(np.finfo(got.dtype).eps), err_msg=var.path)
            share = (value.astype(np.float64) / 3).astype(value.dtype) if var.aggregation == "sum" else value
            np.testing.assert_array_equal(got, np.broadcast_to(share, got.shape))
        else:
            np.testing.assert_array_equal(got, want, err_msg=var.path)
        np.testing.assert_array_equal(np.asarray(var.value), value)  # the read gives the value
    made = _count_programs(monkeypatch)
    monkeypatch.setattr(keras_variables, "HOST_SPREAD_ELEMENTS", 1)
    var, value = cases[0]
    var.assign(value)
    assert made == ["spread"]
    np.testing.assert_array_equal(np.asarray(var.value), value)
