"""Checkpoint.write / save(format="tensorflow"): TensorFlow's own files, checked against TF-written ones.

The same variables TensorFlow 2.21 wrote into ``fixtures/tf/same_as_ours`` and
``fixtures/tf/many_keys`` (a two-block index) give byte-identical files; other
checkpoints are read back by our reader and compared with the structure of a
TF-written fixture of the same content. ``tools/check_tf_reads_ours.py``
checks that TensorFlow itself restores them.
"""

from __future__ import annotations

import gzip
import os

os.environ["KERAS_BACKEND"] = "jax"

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tpustrategy as tps  # noqa: E402
from tpustrategy._src.checkpoint.tf_format import bundle, sstable, wire  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "tf")
GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _graph(prefix: str) -> list[wire.TrackableObject]:
    return wire.decode_object_graph(bundle.BundleReader(prefix).get(GRAPH).item())


def test_the_same_variables_give_tensorflows_bytes(tmp_path):
    ckpt = tps.train.Checkpoint(v=tps.Variable(np.array([1.0, 2.0, 3.0], np.float32)),
                                net={"w": tps.Variable(np.array([[1, 2], [3, 4]], np.int32))},
                                step=tps.Variable(np.int32(3)))
    assert ckpt.write(str(tmp_path / "plain"), format="tensorflow") == str(tmp_path / "plain")
    for suffix in (".index", ".data-00000-of-00001"):
        assert _read(str(tmp_path / "plain") + suffix) == _read(os.path.join(FIXTURES, "same_as_ours", "plain" + suffix))
    assert sorted(os.listdir(tmp_path)) == ["plain.data-00000-of-00001", "plain.index"]  # nothing left over


def test_a_two_block_index_is_tensorflows_too(tmp_path):
    names = {f"{i:03d}_" + "k" * 3000: tps.Variable(np.array([float(i), -float(i)], np.float32))
             for i in range(100)}  # (-float(0) is -0.0, as TensorFlow saw it)
    tps.train.Checkpoint(**names).write(str(tmp_path / "many"), format="tensorflow")
    for suffix in (".index", ".data-00000-of-00001"):
        with gzip.open(os.path.join(FIXTURES, "many_keys", "many" + suffix + ".gz")) as f:
            assert _read(str(tmp_path / "many") + suffix) == f.read(), suffix


def test_every_dtype_reads_back(tmp_path):
    values = {
        "f16": np.array([1.5, -2.25], np.float16), "bf16": np.array([1.0, -3.5], ml_dtypes.bfloat16),
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3), "i8": np.array([-128, 127], np.int8),
        "u16": np.array([65535], np.uint16), "u32": np.array([2**32 - 1], np.uint32),
        "b": np.array([True, False]), "c64": np.array([1 + 2j], np.complex64), "empty": np.zeros((0, 2), np.float32),
    }
    ckpt = tps.train.Checkpoint(**{k: tps.Variable(v) for k, v in values.items()},
                                arr=np.array([7, 8], np.int32), text="caf\u00e9", count=3, rate=0.5)
    ckpt.write(str(tmp_path / "all"), format="tensorflow")
    reader = tps.train.load_checkpoint(str(tmp_path / "all"))
    for name, value in values.items():
        got = reader.get_tensor(name)
        assert got.dtype == value.dtype and got.shape == value.shape, name
        np.testing.assert_array_equal(got, value)
    assert reader.get_tensor("text") == "caf\u00e9".encode()
    assert reader.get_tensor("count") == 3 and reader.get_tensor("rate") == 0.5
    np.testing.assert_array_equal(reader.get_tensor("arr"), [7, 8])
    assert "save_counter/.ATTRIBUTES/VARIABLE_VALUE" not in reader.get_variable_to_shape_map()  # as TF's write


class _Module:
    pass


def _dense(n_in: int, n_out: int, seed: int) -> _Module:
    rng = np.random.default_rng(seed)
    layer = _Module()
    layer.kernel = tps.Variable(rng.standard_normal((n_in, n_out)).astype(np.float32))
    layer.bias = tps.Variable(np.arange(n_out, dtype=np.float32))
    return layer


def _net() -> _Module:
    net = _Module()
    net.l1, net.l2 = _dense(3, 4, 1), _dense(4, 2, 2)
    net.layers = [net.l1, _dense(2, 2, 3)]
    net.step = tps.Variable(np.int32(5))
    net.name = "configuration, not state"
    return net


def test_a_nested_graph_has_tensorflows_nodes_edges_and_keys(tmp_path):
    ckpt = tps.train.Checkpoint(net=_net(), extra={"lr": tps.Variable(np.float32(0.125))})
    path = ckpt.save(str(tmp_path / "ckpt"), format="tensorflow")
    assert path == str(tmp_path / "ckpt-1")
    ours, theirs = _graph(path), _graph(os.path.join(FIXTURES, "nested", "ckpt-1"))
    assert [n.children for n in ours] == [n.children for n in theirs]  # the same numbering and edges
    assert [[(a.name, a.checkpoint_key) for a in n.attributes] for n in ours] == [
        [(a.name, a.checkpoint_key) for a in n.attributes] for n in theirs]
    assert [n.has_checkpoint_values for n in ours] == [n.has_checkpoint_values for n in theirs]
    mine = bundle.BundleReader(path)
    tf = bundle.BundleReader(os.path.join(FIXTURES, "nested", "ckpt-1"))
    assert mine.keys() == tf.keys()
    for key in tf.keys():
        if key not in (GRAPH, "net/step/.ATTRIBUTES/VARIABLE_VALUE"):  # (TF's step is int64, ours int32)
            np.testing.assert_array_equal(mine.get(key), tf.get(key))
            early = key in ("save_counter/.ATTRIBUTES/VARIABLE_VALUE", "extra/lr/.ATTRIBUTES/VARIABLE_VALUE")
            # Data in node order (nodes before net/step's, then 4 bytes fewer after it).
            assert mine.entries[key].offset == tf.entries[key].offset - (0 if early else 4), key


def test_save_writes_save_counter_and_the_state_file(tmp_path):
    v = tps.Variable(np.array([1.0, 2.0], np.float32))
    ckpt = tps.train.Checkpoint(v=v)
    ckpt.save(str(tmp_path / "ckpt"), format="tensorflow")
    v.assign(np.array([5.0, 6.0], np.float32))
    second = ckpt.save(str(tmp_path / "ckpt"), format="tensorflow")
    reader = tps.train.load_checkpoint(str(tmp_path))
    assert reader.get_variable_to_dtype_map()["save_counter/.ATTRIBUTES/VARIABLE_VALUE"] == np.int64
    assert reader.get_tensor("save_counter") == 2
    text = (tmp_path / "checkpoint").read_text()
    assert 'model_checkpoint_path: "ckpt-2"' in text  # relative, as TensorFlow writes it
    assert tps.train.latest_checkpoint(str(tmp_path)) == second
    fresh = tps.Variable(np.zeros(2, np.float32))
    restored = tps.train.Checkpoint(v=fresh)
    restored.restore(tps.train.latest_checkpoint(str(tmp_path))).assert_consumed()
    np.testing.assert_array_equal(fresh.numpy(), [5.0, 6.0])
    assert restored.save_counter == 2


def test_a_sync_on_read_variable_is_written_as_its_aggregate(tmp_path):
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        total = tps.Variable(np.float32(0), synchronization=tps.VariableSynchronization.ON_READ,
                             aggregation=tps.VariableAggregation.SUM)
        w = tps.Variable(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    strategy.run(lambda: total.assign_add(1.5))
    tps.train.Checkpoint(w=w, total=total).write(str(tmp_path / "m"), format="tensorflow")
    # Each replica added 1.5: 12.0 on 8 replicas, 1.5 on one.
    assert tps.train.load_variable(str(tmp_path / "m"), "total") == 1.5 * strategy.num_replicas_in_sync
    assert _read(str(tmp_path / "m.index")) != b""
    ours = _graph(str(tmp_path / "m"))
    assert [n.children for n in ours] == [n.children for n in _graph(os.path.join(FIXTURES, "mirrored", "mirrored"))]


def test_a_keras_3_model_round_trips_with_int64_iterations(tmp_path):
    keras = pytest.importorskip("keras")

    def build():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"),
                                  keras.layers.Dense(2)])
        optimizer = keras.optimizers.Adam(0.01)
        model.compile(optimizer=optimizer, loss="mse")
        return model, optimizer

    keras.utils.set_random_seed(1)
    model, optimizer = build()
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    model.fit(x, np.ones((4, 2), np.float32), epochs=1, batch_size=2, verbose=0)
    path = tps.train.Checkpoint(model=model, optimizer=optimizer).save(str(tmp_path / "ckpt"), format="tensorflow")
    reader = tps.train.load_checkpoint(path)
    dtypes = reader.get_variable_to_dtype_map()
    assert dtypes["optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"] == np.int64
    assert reader.get_tensor("optimizer/_iterations") == 2
    # TensorFlow's edges for a Keras 3 Sequential: model/_functional/_operations/N/_kernel.
    view = tps.train.CheckpointView(path)
    functional = view.children(view.children(0)["model"])["_functional"]
    operations = view.children(view.children(functional)["_operations"])
    assert sorted(view.children(operations["1"])) == ["_kernel", "bias"]
    tf_view = tps.train.CheckpointView(os.path.join(FIXTURES, "keras3", "ckpt-1"))
    tf_optimizer = tf_view.children(tf_view.children(0)["optimizer"])
    assert set(tf_optimizer) - {"_trainable_variables_indices"} <= set(view.children(view.children(0)["optimizer"]))
    # The keys are TensorFlow's: first paths through the optimizer (optimizer/_trainable_variables/0 ...).
    assert sorted(reader.get_variable_to_shape_map().items()) == sorted(
        tps.train.load_checkpoint(os.path.join(FIXTURES, "keras3", "ckpt-1")).get_variable_to_shape_map().items())
    model2, optimizer2 = build()
    optimizer2.build(model2.trainable_variables)
    tps.train.Checkpoint(model=model2, optimizer=optimizer2).restore(path).assert_consumed()
    np.testing.assert_array_equal(model2.predict(x, verbose=0), model.predict(x, verbose=0))
    for a, b in zip(optimizer2.variables, optimizer.variables):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_an_unknown_format_is_refused(tmp_path):
    ckpt = tps.train.Checkpoint(v=tps.Variable(1.0))
    with pytest.raises(ValueError, match="format must be one of .*'tensorflow'.*received 'tf'"):
        ckpt.write(str(tmp_path / "x"), format="tf")
    with pytest.raises(ValueError, match="format must be one of"):
        ckpt.save(str(tmp_path / "x"), format="TF")
    assert os.listdir(tmp_path) == []


def test_our_own_format_still_uses_tensorflows_key_names(tmp_path):
    ckpt = tps.train.Checkpoint(net=_net())
    path = ckpt.save(str(tmp_path / "ckpt"))
    keys = set(tps.train.load_checkpoint(path).get_variable_to_shape_map())
    assert {"net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE", "net/step/.ATTRIBUTES/VARIABLE_VALUE",
            "save_counter/.ATTRIBUTES/VARIABLE_VALUE"} <= keys


def test_the_index_table_reads_back_and_rejects_unsorted_keys():
    entries = [(b"", b"h"), (b"a", b"1"), (b"b" * 300000, b"2"), (b"c", b"3")]
    data = sstable.write_table(entries)
    assert sstable.read_table(data) == entries
    broken = sstable._BlockBuilder(16)
    broken.add(b"b", b"1")
    broken.add(b"a", b"2")
    with pytest.raises(sstable.TableError, match="keys out of order"):
        contents = broken.finish()
        trailer = b"\x00" + sstable.struct.pack("<I", sstable.mask(sstable.crc32c(contents + b"\x00")))
        index = sstable._BlockBuilder(1)
        index.add(b"c", wire.varint(0) + wire.varint(len(contents)))
        index_contents = index.finish()
        table = contents + trailer
        index_offset = len(table)
        table += index_contents + b"\x00" + sstable.struct.pack(
            "<I", sstable.mask(sstable.crc32c(index_contents + b"\x00")))
        footer = wire.varint(0) + wire.varint(0) + wire.varint(index_offset) + wire.varint(len(index_contents))
        footer += b"\0" * (40 - len(footer)) + sstable.struct.pack("<Q", sstable.MAGIC)
        sstable.read_table(table + footer)


def test_a_checkpoint_without_values_is_refused(tmp_path):
    with pytest.raises(ValueError, match="holds no values to write"):
        tps.train.Checkpoint().write(str(tmp_path / "x"), format="tensorflow")
    with pytest.raises(TypeError, match="no TensorFlow checkpoint counterpart"):
        bundle.dtype_code(np.dtype("datetime64[s]"))
