"""Every kind of object a Checkpoint holds comes back exactly (one process, a replica per device: 8 by default)."""

from __future__ import annotations

import collections
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

ON_READ = tps.VariableSynchronization.ON_READ


@pytest.fixture
def strategy():
    return tps.MirroredStrategy()


def test_mirrored_plain_and_sync_on_read_variables_restore_exactly(strategy, tmp_path):
    with strategy.scope():
        w = tps.Variable(np.arange(6, dtype=np.float32).reshape(2, 3) / 7)
        total = tps.Variable(0.0, synchronization=ON_READ, aggregation=tps.VariableAggregation.SUM)
        count = tps.Variable(np.zeros(2, np.int32), synchronization=ON_READ,
                             aggregation=tps.VariableAggregation.ONLY_FIRST_REPLICA)
    plain = tps.Variable(np.array([1.5, -2.0], np.float64) if jax.config.jax_enable_x64 else [1.5, -2.0])
    r = strategy.num_replicas_in_sync
    total.assign(tps.PerReplica([np.float32(i) / 3 for i in range(r)]))
    components = [np.asarray(c).tolist() for c in strategy.experimental_local_results(total)]
    ckpt = tps.train.Checkpoint(w=w, total=total, count=count, plain=plain)
    path = ckpt.save(str(tmp_path / "ckpt"))
    saved = (w.numpy().tolist(), total.numpy().tolist(), plain.numpy().tolist())
    w.assign(np.zeros((2, 3), np.float32))
    total.assign(100.0)
    plain.assign([0.0, 0.0])
    ckpt.restore(path).assert_consumed()
    assert (w.numpy().tolist(), total.numpy().tolist(), plain.numpy().tolist()) == saved
    # TensorFlow's rule (values_util.get_on_read_restore_ops): the saved sum, divided by the replica
    # count, on every replica; MEAN / ONLY_FIRST_REPLICA: the saved value on every replica.
    np.testing.assert_allclose([np.asarray(c) for c in strategy.experimental_local_results(total)],
                               [np.float32(sum(components)) / r] * r, rtol=1e-6)
    last = min(3, r - 1)
    assert strategy.experimental_local_results(w)[last].sharding.device_set == {jax.devices()[last]}


def test_pytrees_of_arrays_come_back_as_the_checkpoint_attribute_and_dicts_in_place(tmp_path):
    params = {"dense": {"kernel": jnp.arange(12.0).reshape(3, 4), "bias": jnp.ones(4, jnp.bfloat16)},
              "scale": np.float32(0.5), "table": np.arange(5, dtype=np.int64)}
    opt_state = optax.adam(1e-3).init({"k": jnp.ones((2, 2))})
    ckpt = tps.train.Checkpoint(params=params, opt_state=opt_state)
    path = ckpt.write(str(tmp_path / "trees"))
    expected = jax.tree_util.tree_map(np.asarray, (params, opt_state))
    params["dense"]["kernel"] = jnp.zeros((3, 4))
    params["scale"] = np.float32(9)
    ckpt.opt_state = optax.adam(1e-3).init({"k": jnp.zeros((2, 2))})
    ckpt.restore(path).assert_consumed()
    assert ckpt.params is params  # the same dict, updated in place
    restored = jax.tree_util.tree_map(np.asarray, (params, ckpt.opt_state))
    assert jax.tree_util.tree_structure(restored) == jax.tree_util.tree_structure(expected)
    for got, want in zip(jax.tree_util.tree_leaves(restored), jax.tree_util.tree_leaves(expected)):
        assert got.dtype == want.dtype and np.array_equal(got, want)
    assert isinstance(params["scale"], np.float32) and isinstance(ckpt.opt_state, tuple)
    assert type(ckpt.opt_state[0]).__name__ == "ScaleByAdamState"


def test_python_numbers_and_strings_keep_their_types(tmp_path):
    ckpt = tps.train.Checkpoint(step=41, lr=0.1 + 0.2, done=False, name="run-7",
                                schedule=(1, 2.5, True))
    path = ckpt.save(str(tmp_path / "ckpt"))
    ckpt.step, ckpt.lr, ckpt.done, ckpt.name, ckpt.schedule = 0, 0.0, True, "", (0, 0.0, False)
    ckpt.restore(path)
    assert (ckpt.step, ckpt.lr, ckpt.done, ckpt.name, ckpt.schedule) == (41, 0.1 + 0.2, False, "run-7", (1, 2.5, True))
    assert type(ckpt.step) is int and type(ckpt.done) is bool


def _rest(it, n):
    return [np.asarray(x).tolist() for x in (next(it) for _ in range(n))]


def test_a_plain_dataset_iterator_resumes_in_the_middle_of_a_shuffled_epoch(tmp_path):
    def build():
        return tpsd.Dataset.range(50).shuffle(16, seed=4).map(lambda x: x * 10).batch(3).repeat()

    it = iter(build())
    _rest(it, 7)
    ckpt = tps.train.Checkpoint(iterator=it)
    path = ckpt.save(str(tmp_path / "ckpt"))
    expected = _rest(it, 40)
    fresh = iter(build())
    tps.train.Checkpoint(iterator=fresh).restore(path).assert_consumed()
    assert _rest(fresh, 40) == expected


def _local_steps(strategy, it, n):
    return [[np.asarray(v).tolist() for v in strategy.experimental_local_results(next(it))] for _ in range(n)]


def test_a_distributed_iterator_resumes_at_the_next_global_batch(strategy, tmp_path):
    def build():
        ds = tpsd.Dataset.range(200).shuffle(32, seed=1).batch(16)
        return iter(strategy.experimental_distribute_dataset(ds))

    it = build()
    _local_steps(strategy, it, 3)
    path = tps.train.Checkpoint(iterator=it).save(str(tmp_path / "ckpt"))
    expected = _local_steps(strategy, it, 5)
    fresh = build()
    tps.train.Checkpoint(iterator=fresh).restore(path)
    assert _local_steps(strategy, fresh, 5) == expected


def test_an_iterator_from_distribute_datasets_from_function_resumes(strategy, tmp_path):
    def build():
        def dataset_fn(ctx):
            return tpsd.Dataset.range(100).shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(2)
        return iter(strategy.distribute_datasets_from_function(dataset_fn))

    it = build()
    _local_steps(strategy, it, 2)
    path = tps.train.Checkpoint(iterator=it).save(str(tmp_path / "ckpt"))
    expected = _local_steps(strategy, it, 3)
    fresh = build()
    tps.train.Checkpoint(iterator=fresh).restore(path)
    assert _local_steps(strategy, fresh, 3) == expected


class Dense:
    def __init__(self, n):
        self.kernel = tps.Variable(np.full((n, n), 0.5, np.float32))
        self.bias = tps.Variable(np.zeros(n, np.float32))
        self.activation = jax.nn.relu  # not state: skipped


class Model:
    def __init__(self):
        self.layers = [Dense(2), Dense(3)]
        self.config = {"units": 3}  # no arrays: skipped


def test_objects_nested_checkpoints_and_shared_variables_restore_by_name(strategy, tmp_path):
    with strategy.scope():
        model = Model()
    extra = tps.train.Checkpoint(head=model.layers[1].bias, note=3)
    ckpt = tps.train.Checkpoint(model=model, extra=extra)
    model.layers[0].kernel.assign(np.eye(2, dtype=np.float32))
    model.layers[1].bias.assign([1.0, 2.0, 3.0])
    path = ckpt.save(str(tmp_path / "ckpt"))
    model.layers[0].kernel.assign(np.zeros((2, 2), np.float32))
    model.layers[1].bias.assign([0.0, 0.0, 0.0])
    # A differently built graph finds the shared bias by its other path, extra/head.
    bias = tps.Variable(np.zeros(3, np.float32))
    status = tps.train.Checkpoint(extra=tps.train.Checkpoint(head=bias)).restore(path)
    status.assert_existing_objects_matched()
    with pytest.raises(AssertionError, match="model/layers/0/kernel"):
        status.assert_consumed()
    assert bias.numpy().tolist() == [1.0, 2.0, 3.0]
    ckpt.restore(path).assert_consumed()
    assert model.layers[0].kernel.numpy().tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert model.layers[1].bias.numpy().tolist() == [1.0, 2.0, 3.0]


def test_optimizer_and_metric_objects_restore_their_state(strategy, tmp_path):
    with strategy.scope():
        w = tps.Variable(np.ones(3, np.float32))
        opt = tps.optimizers.Adam(0.1)
        mean = tps.metrics.Mean()
    opt.apply_gradients([(np.array([1.0, -1.0, 0.5], np.float32), w)])
    mean.update_state([1.0, 2.0, 6.0])
    ckpt = tps.train.Checkpoint(w=w, optimizer=opt, metric=mean)
    path = ckpt.save(str(tmp_path / "ckpt"))
    opt.apply_gradients([(np.array([1.0, -1.0, 0.5], np.float32), w)])
    after_second = w.numpy().tolist()
    mean.update_state([100.0])
    ckpt.restore(path).assert_consumed()
    assert float(mean.result()) == 3.0
    assert int(opt.iterations.numpy()) == 1
    opt.apply_gradients([(np.array([1.0, -1.0, 0.5], np.float32), w)])
    assert w.numpy().tolist() == after_second  # Adam's moments came back too


def test_save_numbers_checkpoints_and_restore_brings_back_the_counter(tmp_path):
    ckpt = tps.train.Checkpoint(step=1)
    prefix = str(tmp_path / "run" / "ckpt")
    assert ckpt.save(prefix) == prefix + "-1"
    ckpt.step = 2
    assert ckpt.save(prefix) == prefix + "-2"
    assert ckpt.save_counter == 2
    assert tps.train.latest_checkpoint(str(tmp_path / "run")) == prefix + "-2"
    fresh = tps.train.Checkpoint(step=0)
    fresh.restore(prefix + "-1")
    assert (fresh.step, fresh.save_counter) == (1, 1)
    assert fresh.save(prefix) == prefix + "-2"  # continues the numbering, overwriting -2


def test_write_uses_the_exact_path_and_is_not_a_latest_checkpoint(tmp_path):
    ckpt = tps.train.Checkpoint(x=np.arange(3))
    path = ckpt.write(os.fspath(tmp_path / "exported"))
    assert path == str(tmp_path / "exported") and os.path.isdir(path)
    assert tps.train.latest_checkpoint(str(tmp_path)) is None
    assert ckpt.save_counter == 0


def test_restore_none_restores_nothing_and_says_so():
    ckpt = tps.train.Checkpoint(step=3)
    status = ckpt.restore(None)
    assert ckpt.step == 3
    status.expect_partial()
    with pytest.raises(AssertionError, match=r"No checkpoint specified \(save_path=None\)"):
        status.assert_consumed()


def test_read_like_returns_trees_placed_on_the_requested_sharding(strategy, tmp_path):
    params = {"w": jnp.arange(8.0), "b": np.ones(2, np.float32)}
    ckpt = tps.train.Checkpoint(params=params, step=5)
    path = ckpt.save(str(tmp_path / "ckpt"))
    replicated = jax.sharding.NamedSharding(strategy.mesh, jax.sharding.PartitionSpec())
    like = {"params": {"w": jax.ShapeDtypeStruct((8,), jnp.float32, sharding=replicated),
                       "b": np.zeros(2, np.float32)}}
    got = ckpt.read(path, like=like)
    assert got["params"]["w"].sharding == replicated
    assert got["params"]["w"].tolist() == list(range(8)) and got["params"]["b"].tolist() == [1.0, 1.0]
    assert ckpt.params is params and set(got) == {"params"}
    with pytest.raises(ValueError, match=r"(?s)'nothing/x' are not in checkpoint.*nothing was read"):
        ckpt.read(path, like={"nothing": {"x": np.zeros(1)}})


Point = collections.namedtuple("Point", "x y")


def test_namedtuples_restore_as_the_same_type(tmp_path):
    ckpt = tps.train.Checkpoint(p=Point(np.float32(1), jnp.arange(2)))
    path = ckpt.save(str(tmp_path / "c"))
    ckpt.p = Point(np.float32(0), jnp.zeros(2, jnp.int32))
    ckpt.restore(path)
    assert isinstance(ckpt.p, Point) and float(ckpt.p.x) == 1.0 and ckpt.p.y.tolist() == [0, 1]


class Net:
    """The checkpoint guide's model: y = x @ kernel + bias."""

    def __init__(self):
        self.kernel = tps.Variable(np.full((1, 5), 0.1, np.float32))
        self.bias = tps.Variable(np.zeros(5, np.float32))

    def __call__(self, x):
        return x @ self.kernel.read_value() + self.bias.read_value()


def _guide_objects(strategy):
    with strategy.scope():
        net, opt, step = Net(), tps.optimizers.Adam(0.1), tps.Variable(1)
    inputs = np.arange(1, 11, dtype=np.float32).reshape(10, 1)
    labels = np.arange(5, dtype=np.float32)[None] * 3 + inputs
    iterator = iter(tpsd.Dataset.from_tensor_slices((inputs, labels)).repeat().batch(2))
    return tps.train.Checkpoint(step=step, optimizer=opt, net=net, iterator=iterator)


def _guide_steps(ckpt, n):
    losses = []
    for _ in range(n):
        x, y = next(ckpt.iterator)
        weights = [ckpt.net.kernel, ckpt.net.bias]

        def loss_fn(k, b, x=x, y=y):
            return jnp.mean(jnp.abs(x @ k + b - y))

        loss, grads = jax.value_and_grad(loss_fn, argnums=(0, 1))(*(w.read_value() for w in weights))
        ckpt.optimizer.apply_gradients(zip(grads, weights))
        ckpt.step.assign_add(1)
        losses.append(float(loss))
    return losses


def test_the_checkpoint_guide_flow_restores_an_optimizer_before_its_first_step(strategy, tmp_path):
    straight = _guide_steps(_guide_objects(strategy), 20)
    ckpt = _guide_objects(strategy)
    manager = tps.train.CheckpointManager(ckpt, str(tmp_path / "tf_ckpts"), max_to_keep=3)
    first = _guide_steps(ckpt, 10)
    manager.save()
    fresh = _guide_objects(strategy)  # new model, a new optimizer that never ran, new iterator
    manager = tps.train.CheckpointManager(fresh, str(tmp_path / "tf_ckpts"), max_to_keep=3)
    fresh.restore(manager.latest_checkpoint).assert_consumed()  # Adam's moments included
    assert int(fresh.step) == 11
    assert first + _guide_steps(fresh, 10) == straight
