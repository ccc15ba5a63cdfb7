"""tps.Variable's sparse ops, copies, references and remaining tf.Variable members.

Expected numbers are TensorFlow 2.21's (tools/tf_variable_members_reference.py runs the
same programs on a 2-device MirroredStrategy and prints them).
"""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps


def _two():
    return tps.MirroredStrategy(devices=jax.devices()[:2])


def _replica_scatter(strategy, v, op):
    def fn():
        rid = tps.get_replica_context().replica_id_in_sync_group.astype(jnp.float32)
        getattr(v, op)(tps.IndexedSlices(jnp.stack([10.0 + rid]), jnp.asarray([1])))
    return fn


# TensorFlow 2.21, MirroredStrategy over 2 devices, v = [1, 2, 3, 4], replica r scatters 10 + r into row 1.
TF_REPLICA_SCATTER = {
    ("SUM", "scatter_add"): [1, 23, 3, 4], ("SUM", "scatter_sub"): [1, -19, 3, 4],
    ("MEAN", "scatter_add"): [1, 12.5, 3, 4], ("MEAN", "scatter_sub"): [1, -8.5, 3, 4],
    ("ONLY_FIRST_REPLICA", "scatter_add"): [1, 12, 3, 4], ("ONLY_FIRST_REPLICA", "scatter_sub"): [1, -8, 3, 4],
    ("ONLY_FIRST_REPLICA", "scatter_update"): [1, 10, 3, 4], ("ONLY_FIRST_REPLICA", "scatter_max"): [1, 10, 3, 4],
}


@pytest.mark.devices(2)
@pytest.mark.parametrize("agg,op", sorted(TF_REPLICA_SCATTER))
def test_a_scatter_in_a_replica_function_applies_the_aggregated_update(agg, op):
    strategy = _two()
    with strategy.scope():
        v = tps.Variable([1.0, 2.0, 3.0, 4.0], aggregation=agg)
    fn = _replica_scatter(strategy, v, op)
    strategy.run(fn)
    np.testing.assert_allclose(v.numpy(), TF_REPLICA_SCATTER[(agg, op)])
    for component in v.values:
        np.testing.assert_allclose(component.numpy(), TF_REPLICA_SCATTER[(agg, op)])
    v.assign([1.0, 2.0, 3.0, 4.0])
    tps.function(lambda: strategy.run(fn))()
    np.testing.assert_allclose(v.numpy(), TF_REPLICA_SCATTER[(agg, op)])


# scatter_mul / scatter_div are applied (TensorFlow's aggregated IndexedSlices): test_tf_variable_references.
@pytest.mark.parametrize("op", ["scatter_update", "scatter_max", "scatter_min"])
def test_a_row_scatter_of_a_sum_or_mean_mirrored_variable_raises_tensorflows_error(op):
    strategy = _two()
    with strategy.scope():
        v = tps.Variable([1.0, 2.0], aggregation="MEAN")
    with pytest.raises(NotImplementedError, match=f"{op} is only supported for mirrored variable"):
        getattr(v, op)(tps.IndexedSlices([1.0], [0]))


@pytest.mark.devices(2)
def test_a_none_aggregated_scatter_that_differs_per_replica_raises_and_an_equal_one_applies():
    strategy = _two()
    with strategy.scope():
        v = tps.Variable([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="You must specify an aggregation method"):
        strategy.run(_replica_scatter(strategy, v, "scatter_add"))
    strategy.run(lambda: v.scatter_update(tps.IndexedSlices([7.0], [2])))
    assert v.numpy().tolist() == [1.0, 2.0, 7.0, 4.0]


@pytest.mark.devices(2)
@pytest.mark.parametrize("agg", ["NONE", "SUM", "MEAN", "ONLY_FIRST_REPLICA"])
def test_cross_replica_scatters_and_reads_of_mirrored_variables(agg):
    strategy = _two()
    with strategy.scope():
        v = tps.Variable([1.0, 2.0, 3.0, 4.0], aggregation=agg)
    v.scatter_add(tps.IndexedSlices([5.0], [0]))                  # TensorFlow: [6, 2, 3, 4]
    assert v.numpy().tolist() == [6.0, 2.0, 3.0, 4.0]
    assert v.sparse_read([0, 2]).tolist() == [6.0, 3.0]
    assert v.gather_nd([[1], [3]]).tolist() == [2.0, 4.0]
    v.scatter_nd_sub([[0]], [1.0])
    assert [c.numpy().tolist() for c in v.values] == [[5.0, 2.0, 3.0, 4.0]] * 2


@pytest.mark.devices(2)
def test_sync_on_read_scatters_touch_the_replicas_component_or_the_aggregate():
    strategy = _two()
    with strategy.scope():
        r = tps.Variable([0.0, 0.0], synchronization="ON_READ", aggregation="SUM")

    def fn():
        rid = tps.get_replica_context().replica_id_in_sync_group.astype(jnp.float32)
        r.scatter_add(tps.IndexedSlices(jnp.stack([1.0 + rid]), jnp.asarray([1])))
        return r.sparse_read([1])

    out = strategy.run(fn)
    assert [float(x[0]) for x in out.values] == [1.0, 2.0]        # each replica reads its component
    assert [c.numpy().tolist() for c in r.values] == [[0.0, 1.0], [0.0, 2.0]]
    assert r.numpy().tolist() == [0.0, 3.0]
    r.scatter_update(tps.IndexedSlices([4.0], [0]))               # acts on the aggregate (SUM: split)
    assert r.numpy().tolist() == [4.0, 3.0]
    with pytest.raises(ValueError, match="does not support `scatter_add` in cross-replica context"):
        r.scatter_add(tps.IndexedSlices([1.0], [0]))


def test_plain_variable_scatter_family_matches_tensorflow():
    v = tps.Variable([1, 2, 3])
    assert v.scatter_nd_max([[0]], [5]).numpy().tolist() == [5, 2, 3]
    assert v.scatter_div(tps.IndexedSlices([2], [2])).numpy().tolist() == [5, 2, 1]   # truncating
    assert v.scatter_mul(tps.IndexedSlices([3, 2], [1, 1])).numpy().tolist() == [5, 12, 1]
    assert v.scatter_min(tps.IndexedSlices([0], [0])).numpy().tolist() == [0, 12, 1]
    assert v.scatter_nd_min([[1]], [4]).numpy().tolist() == [0, 4, 1]
    assert v.scatter_nd_update([[2]], [9]).numpy().tolist() == [0, 4, 9]
    assert v.scatter_nd_add([[2], [2]], [1, 1]).numpy().tolist() == [0, 4, 11]   # repeated indices add up
    m = tps.Variable([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    m.batch_scatter_update(tps.IndexedSlices([[7.0], [8.0]], [[0], [2]]))
    assert m.numpy().tolist() == [[7.0, 2.0, 3.0], [4.0, 5.0, 8.0]]     # TensorFlow's result
    m.scatter_update(tps.IndexedSlices([[0.0, 0.0, 0.0]], [1]))
    assert m.numpy().tolist() == [[7.0, 2.0, 3.0], [0.0, 0.0, 0.0]]
    assert m.gather_nd([[0, 1], [0, 2]]).tolist() == [2.0, 3.0]


def test_scatter_errors_name_the_argument_and_the_fix():
    v = tps.Variable([1, 2, 3])
    with pytest.raises(TypeError, match="must be a `tf.IndexedSlices`. Received arg: \\(\\[0\\], \\[1\\]\\)"):
        v.scatter_add(([0], [1]))
    with pytest.raises(tps.errors.InvalidArgumentError, match=r"indices\[0\] = 5 is not in \[0, 3\)"):
        v.scatter_add(tps.IndexedSlices([1], [5]))
    with pytest.raises(TypeError, match="cannot convert a float32 value"):
        v.scatter_update(tps.IndexedSlices([1.5], [0]))
    with pytest.raises(TypeError, match="indices must be integers"):
        v.sparse_read([0.5])
    with pytest.raises(ValueError, match="last dimension of the indices must be between 1 and 1"):
        v.scatter_nd_add([[0, 1]], [1])


def test_bitwise_operators_and_iteration_follow_tensorflow():
    v = tps.Variable([1, 2, 3])
    assert (v & 6).tolist() == [0, 2, 2] and (6 & v).tolist() == [0, 2, 2]
    assert (v | 4).tolist() == [5, 6, 7] and (4 | v).tolist() == [5, 6, 7]
    assert (v ^ 1).tolist() == [0, 3, 2] and (1 ^ v).tolist() == [0, 3, 2]
    assert [int(x) for x in v] == [1, 2, 3]
    with pytest.raises(TypeError, match="Cannot iterate over a scalar tensor"):
        iter(tps.Variable(1.0))
    flags = tps.Variable([True, False])
    assert (flags & True).tolist() == [True, False]


def test_ref_device_get_shape_and_initial_value():
    strategy = _two()
    with strategy.scope():
        v = tps.Variable([1.0, 2.0])
    v.assign([3.0, 4.0])
    assert v.get_shape() == (2,) == v.shape
    assert v.device == jax.devices()[0]
    assert v.initial_value.tolist() == [1.0, 2.0]
    assert v.ref().deref() is v and v.ref() == v.ref() and hash(v.ref()) == hash(v.ref())
    assert v.ref() != tps.Variable([1.0, 2.0]).ref()
    assert {v.ref(): 1}[v.ref()] == 1
    plain = tps.Variable(5.0)
    assert plain.device == jax.local_devices()[0] and float(plain.initial_value) == 5.0


def test_initial_value_of_a_variable_made_from_a_traced_value_says_why_it_is_missing():
    made = []

    @tps.function
    def f(x):
        if not made:
            made.append(tps.Variable(x * 2.0))
        return made[0].read_value()

    f(jnp.asarray(1.0))
    with pytest.raises(RuntimeError, match="created inside a traced step"):
        _ = made[0].initial_value


# A sync-on-read copy reads as the SUM of its two components: that needs two replicas.
@pytest.mark.parametrize("kind", ["mirrored", pytest.param("sync_on_read", marks=pytest.mark.devices(2)), "plain"])
def test_deepcopy_gives_a_new_variable_of_the_same_kind_on_the_same_strategy(kind):
    strategy = _two()
    kwargs = {"synchronization": "ON_READ", "aggregation": "SUM"} if kind == "sync_on_read" else {}
    if kind == "plain":
        v = tps.Variable([1.0, 2.0], name="w", trainable=False)
    else:
        with strategy.scope():
            v = tps.Variable([1.0, 2.0], name="w", trainable=False, **kwargs)
    w = copy.deepcopy(v)
    assert w is not v and w.name == "w:0" and not w.trainable
    assert w.strategy is v.strategy and w.synchronization == v.synchronization and w.aggregation == v.aggregation
    assert [c.device for c in getattr(w, "values", ())] == [c.device for c in getattr(v, "values", ())]
    expected = [2.0, 4.0] if kind == "sync_on_read" else [1.0, 2.0]   # TensorFlow: SUM of the copied components
    assert w.numpy().tolist() == expected
    w.assign([9.0, 9.0]) if kind != "sync_on_read" else w.values[0].assign([9.0, 9.0])
    assert v.numpy().tolist() == expected                              # independent of the original
    assert copy.copy(v) is v                                           # TensorFlow: a copy shares the state
    nested = copy.deepcopy({"a": v, "b": v})
    assert nested["a"] is nested["b"] and nested["a"] is not v


def test_deepcopy_inside_a_step_raises_tensorflows_error():
    v = tps.Variable(1.0)
    with pytest.raises(NotImplementedError, match=r"^__deepcopy__\(\) is only available when eager execution is enabled\."):
        tps.function(lambda: copy.deepcopy(v))()


def test_indexed_slices_is_a_pytree_with_tensorflows_fields():
    s = tps.IndexedSlices(values=jnp.ones((2, 3)), indices=jnp.asarray([0, 4]), dense_shape=[5, 3])
    assert s.dense_shape == (5, 3) and s.shape == (5, 3) and s.dtype == jnp.float32
    doubled = jax.tree.map(lambda x: x * 2, s)
    assert isinstance(doubled, tps.IndexedSlices) and doubled.indices.tolist() == [0, 8]
    assert (-s).values.tolist() == [[-1.0] * 3] * 2
