"""Names issue 23 adds to the surface, with TensorFlow's behaviour (types, optionals, contexts, errors, protos)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd


def _s(n=4):
    return tps.MirroredStrategy(devices=jax.devices()[:n])


def test_distributed_datasets_and_iterators_of_both_kinds_are_instances_of_the_public_types():
    s = _s()
    dist = s.experimental_distribute_dataset(tpsd.Dataset.range(8).batch(4))
    from_fn = s.distribute_datasets_from_function(lambda ctx: tpsd.Dataset.range(8).batch(1))
    for ds in (dist, from_fn):
        assert isinstance(ds, tps.DistributedDataset)
        it = iter(ds)
        assert isinstance(it, tps.DistributedIterator)
        if s.num_replicas_in_sync > 1:
            assert it.element_spec.values == ds.element_spec.values
        else:  # TensorFlow: one replica's elements, and so their spec, are not wrapped
            assert it.element_spec == ds.element_spec == tpsd.TensorSpec(shape=(None,), dtype="int64")
    assert isinstance(s.extended, tps.StrategyExtended)
    assert not isinstance(tpsd.Dataset.range(3), tps.DistributedDataset)


def test_reduce_folds_every_step_also_for_datasets_from_a_function():
    s = _s()
    from_fn = s.distribute_datasets_from_function(lambda ctx: tpsd.Dataset.range(8).batch(1))
    # 8 elements, 4 replicas: 2 steps; each step's local results hold one element per replica.
    total = from_fn.reduce(0, lambda acc, step: acc + sum(int(np.sum(v)) for v in s.experimental_local_results(step)))
    assert total == sum(range(8))


def test_get_value_of_an_empty_optional_raises_invalid_argument_as_tensorflow():
    s = _s()
    it = iter(s.experimental_distribute_dataset(tpsd.Dataset.range(4).batch(4)))
    assert it.get_next_as_optional().has_value()
    empty = it.get_next_as_optional()
    assert not empty.has_value()
    with pytest.raises(tps.errors.InvalidArgumentError, match=r"(?s)has no value.*has_value\(\)"):
        empty.get_value()


@pytest.mark.devices(2)
def test_experimental_names_are_the_strategies_and_value_context_of_tensorflow():
    assert tps.experimental.TPUStrategy is tps.TPUStrategy
    assert tps.experimental.MultiWorkerMirroredStrategy is tps.MultiWorkerMirroredStrategy
    contexts = []
    s = _s(2)
    s.experimental_distribute_values_from_function(lambda ctx: contexts.append(ctx) or 0.0)
    assert all(isinstance(c, tps.experimental.ValueContext) for c in contexts)
    assert [(c.replica_id_in_sync_group, c.num_replicas_in_sync) for c in contexts] == [(0, 2), (1, 2)]


@pytest.mark.devices(2)
def test_replica_context_devices_name_the_replica_devices():
    assert tps.get_replica_context().devices == ("/job:worker/replica:0/task:0/device:CPU:0",)
    s = _s(2)
    seen = []

    def step():
        seen.append(tps.get_replica_context().devices)
        return 0.0

    s.run(step)
    assert seen[0] == ("/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:1")


def test_operator_not_allowed_in_graph_error_catches_jax_bool_and_int_conversion_of_traced_values():
    assert issubclass(tps.errors.OperatorNotAllowedInGraphError, TypeError)

    @jax.jit
    def branch(x):
        if x > 0:  # a Python bool of a traced value: TensorFlow's OperatorNotAllowedInGraphError
            return x
        return -x

    with pytest.raises(tps.errors.OperatorNotAllowedInGraphError):
        branch(jnp.float32(1.0))
    with pytest.raises(tps.errors.OperatorNotAllowedInGraphError):
        jax.jit(lambda x: list(range(x)))(jnp.int32(2))  # __index__ of a traced value
    assert not isinstance(ValueError("x"), tps.errors.OperatorNotAllowedInGraphError)
    err = tps.errors.OperatorNotAllowedInGraphError("using a `tf.Tensor` as a Python `bool` is not allowed")
    assert isinstance(err, TypeError) and "bool" in str(err)


def test_train_example_protos_round_trip_with_tensorflows_full_names():
    ex = tps.train.Example(features=tps.train.Features(feature={
        "x": tps.train.Feature(float_list=tps.train.FloatList(value=[1.5, 2.0])),
        "y": tps.train.Feature(int64_list=tps.train.Int64List(value=[3])),
        "s": tps.train.Feature(bytes_list=tps.train.BytesList(value=[b"ab"])),
    }))
    back = tps.train.Example.FromString(ex.SerializeToString())
    assert list(back.features.feature["x"].float_list.value) == [1.5, 2.0]
    assert back.DESCRIPTOR.full_name == "tensorflow.Example"
    seq = tps.train.SequenceExample(
        context=tps.train.Features(feature={"id": tps.train.Feature(int64_list=tps.train.Int64List(value=[7]))}),
        feature_lists=tps.train.FeatureLists(feature_list={"tokens": tps.train.FeatureList(feature=[
            tps.train.Feature(int64_list=tps.train.Int64List(value=[1, 2])),
            tps.train.Feature(int64_list=tps.train.Int64List(value=[3]))])}))
    seq = tps.train.SequenceExample.FromString(seq.SerializeToString())
    assert [list(f.int64_list.value) for f in seq.feature_lists.feature_list["tokens"].feature] == [[1, 2], [3]]
    assert tps.train.Example is tpsd.Example


def test_train_cluster_spec_is_the_resolvers_cluster_spec_and_as_cluster_def_names_its_row():
    spec = tps.train.ClusterSpec({"worker": ["a:1", "b:2"]})
    assert spec.num_tasks("worker") == 2 and spec.task_address("worker", 1) == "b:2"
    assert tps.train.ClusterSpec is tps.cluster_resolver.ClusterSpec
    with pytest.raises(NotImplementedError, match=r"(?s)tf\.train\.ClusterSpec\.as_cluster_def.*Use instead: ClusterSpec"):
        spec.as_cluster_def()


@pytest.mark.parametrize("name", ["tf.train.experimental", "tf.lookup.experimental", "tf.tpu.experimental.embedding"])
def test_names_we_do_not_have_raise_with_the_reason_and_the_fix(name):
    module = {"tf.train.experimental": tps.train, "tf.lookup.experimental": tps.lookup,
              "tf.tpu.experimental.embedding": tps.tpu.experimental}[name]
    placeholder = getattr(module, name.rsplit(".", 1)[1])
    with pytest.raises(NotImplementedError, match=f"(?s){name} has no counterpart in tpustrategy: .*Use instead: "):
        placeholder.SomeClass  # noqa: B018


@pytest.mark.devices(2)
def test_replicas_returning_different_structures_raise_an_assertion_error_as_tensorflow():
    s = _s(2)

    def step():
        rid = int(tps.get_replica_context().replica_id_in_sync_group)  # concrete: the eager path
        return (1.0,) if rid == 0 else (1.0, 2.0)

    with pytest.warns(UserWarning), pytest.raises(AssertionError, match="different structures"):
        s.run(step)
    from tpustrategy._src.errors import ReplicaStructureError  # also the ValueError raised before

    assert issubclass(ReplicaStructureError, ValueError)
