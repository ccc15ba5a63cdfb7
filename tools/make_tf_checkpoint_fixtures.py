"""Writes the TensorFlow-written checkpoint fixtures of ``tests/checkpoint/fixtures/tf/``.

Run with TensorFlow 2.21's interpreter (never imported by the library or the tests)::

    /work/tfvenv/bin/python tools/make_tf_checkpoint_fixtures.py

Each fixture folder holds the files TensorFlow wrote (``*.index``,
``*.data-*``, maybe the ``checkpoint`` state file) and ``expected.json``:
what TensorFlow's own ``tf.train.load_checkpoint`` reads back from them
(every key's dtype, shape and values) and, for object-based checkpoints, the
root's children as ``tf.train.CheckpointView`` lists them. The tests compare
our reader against that file.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "checkpoint", "fixtures", "tf")


def _jsonable(value: np.ndarray) -> object:
    if value.dtype == object or value.dtype.kind == "S":
        return [bytes(v).hex() for v in value.reshape(-1)]
    if value.dtype.kind == "c":
        return [[float(v.real), float(v.imag)] for v in value.reshape(-1)]
    if value.dtype.kind == "b":
        return [bool(v) for v in value.reshape(-1)]
    if value.dtype.kind in "iu":
        return [int(v) for v in value.reshape(-1)]
    return [float(v) for v in value.astype(np.float64).reshape(-1)]


def _dump(folder: str, prefix: str, extra: dict | None = None) -> None:
    """Writes expected.json: TF's reading of ``prefix`` (and ``extra``)."""
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    shapes = reader.get_variable_to_shape_map()
    tensors = {}
    for key in sorted(shapes):
        value = reader.get_tensor(key)
        array = np.asarray(value)
        if key == "_CHECKPOINTABLE_OBJECT_GRAPH":
            tensors[key] = {"dtype": "string", "shape": [], "values": None}
            continue
        tensors[key] = {"dtype": dtypes[key].name, "shape": list(shapes[key]),
                        "values": _jsonable(array)}
    out = {"prefix": os.path.basename(prefix), "tensors": tensors}
    try:
        view = tf.train.CheckpointView(prefix)
        out["root_children"] = sorted(view.children(view.root) if hasattr(view, "root") else
                                      view.children(0))
        out["descendants"] = len(view.descendants())
    except Exception as e:  # a name-based (tf.compat.v1) checkpoint has no object graph
        out["root_children"] = None
        out["view_error"] = type(e).__name__
    out.update(extra or {})
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)


def _fresh(name: str) -> str:
    folder = os.path.join(OUT, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    return folder


def dtypes() -> None:
    folder = _fresh("dtypes")
    rng = np.random.default_rng(0)
    values = {
        "f16": tf.constant([1.5, -2.25, 65504.0], tf.float16),
        "bf16": tf.constant([1.0, -3.5, 1e30, 0.0078125], tf.bfloat16),
        "f32": tf.constant(rng.standard_normal((2, 3)).astype(np.float32)),
        "f64": tf.constant([np.pi, -1e300], tf.float64),
        "i8": tf.constant([-128, 127, 3], tf.int8),
        "i16": tf.constant([-32768, 32767], tf.int16),
        "i32": tf.constant([[1, -2], [3, 2**31 - 1]], tf.int32),
        "i64": tf.constant([-(2**63), 2**40 + 7], tf.int64),
        "u8": tf.constant([0, 255, 17], tf.uint8),
        "u16": tf.constant([65535, 1], tf.uint16),
        "u32": tf.constant([2**32 - 1, 5], tf.uint32),
        "u64": tf.constant([2**64 - 1, 9], tf.uint64),
        "b": tf.constant([True, False, True]),
        "c64": tf.constant([1 + 2j, -0.5 - 4j], tf.complex64),
        "c128": tf.constant([[3 - 1j]], tf.complex128),
        "s": tf.constant([b"hello", b"", b"\x00\xffbytes", "caf\u00e9".encode()]),
        "s_scalar": tf.constant(b"one string"),
        "scalar": tf.constant(7.25, tf.float32),
        "empty": tf.zeros((0, 3), tf.float32),
    }
    variables = {k: tf.Variable(v) for k, v in values.items()}
    tf.train.Checkpoint(**variables).write(os.path.join(folder, "dtypes"))
    _dump(folder, os.path.join(folder, "dtypes"))


class _Dense(tf.Module):
    def __init__(self, n_in: int, n_out: int, seed: int):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.kernel = tf.Variable(rng.standard_normal((n_in, n_out)).astype(np.float32))
        self.bias = tf.Variable(np.arange(n_out, dtype=np.float32))


class _Net(tf.Module):
    def __init__(self):
        super().__init__()
        self.l1 = _Dense(3, 4, 1)
        self.l2 = _Dense(4, 2, 2)
        self.layers = [self.l1, _Dense(2, 2, 3)]  # l1 reached twice (one value, two paths)
        self.step = tf.Variable(5, dtype=tf.int64)


def nested() -> None:
    folder = _fresh("nested")
    ckpt = tf.train.Checkpoint(net=_Net(), extra={"lr": tf.Variable(0.125)})
    ckpt.save(os.path.join(folder, "ckpt"))  # ckpt-1, with the 'checkpoint' file and save_counter
    _dump(folder, os.path.join(folder, "ckpt-1"))


def manager() -> None:
    folder = _fresh("manager")
    v = tf.Variable([1.0, 2.0])
    step = tf.Variable(0, dtype=tf.int64)
    ckpt = tf.train.Checkpoint(v=v, step=step)
    mgr = tf.train.CheckpointManager(ckpt, folder, max_to_keep=2)
    for i in range(3):
        v.assign_add([1.0, 1.0])
        step.assign(i + 1)
        mgr.save()
    older = tf.train.load_checkpoint(mgr.checkpoints[0])
    _dump(folder, mgr.latest_checkpoint,
          {"checkpoints": [os.path.basename(p) for p in mgr.checkpoints],
           "older_v": older.get_tensor("v/.ATTRIBUTES/VARIABLE_VALUE").tolist()})


def keras3() -> None:
    import keras

    folder = _fresh("keras3")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(2)])
    optimizer = keras.optimizers.Adam(0.01)
    model.compile(optimizer=optimizer, loss="mse")
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    y = np.ones((4, 2), np.float32)
    model.fit(x, y, epochs=2, batch_size=2, verbose=0)
    ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer)
    ckpt.save(os.path.join(folder, "ckpt"))
    predictions = model.predict(x, verbose=0)
    _dump(folder, os.path.join(folder, "ckpt-1"),
          {"x": x.tolist(), "predictions": predictions.tolist(),
           "weights": [w.numpy().tolist() for w in model.weights],
           "optimizer_variables": [[v.path, np.asarray(v.numpy()).tolist()] for v in optimizer.variables],
           "iterations": int(optimizer.iterations.numpy())})


def mirrored() -> None:
    folder = _fresh("mirrored")
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
        total = tf.Variable(0.0, synchronization=tf.VariableSynchronization.ON_READ,
                            aggregation=tf.VariableAggregation.SUM)
    strategy.run(lambda: total.assign_add(1.5))
    ckpt = tf.train.Checkpoint(w=w, total=total)
    ckpt.write(os.path.join(folder, "mirrored"))
    _dump(folder, os.path.join(folder, "mirrored"))


def sharded() -> None:
    folder = _fresh("sharded")
    variables = {f"v{i}": tf.Variable(np.full((64,), i, np.float32)) for i in range(4)}
    policy = tf.train.experimental.MaxShardSizePolicy(max_shard_size=300)
    options = tf.train.CheckpointOptions(experimental_sharding_callback=policy)
    tf.train.Checkpoint(**variables).write(os.path.join(folder, "sharded"), options=options)
    _dump(folder, os.path.join(folder, "sharded"))


def sliced() -> None:
    folder = _fresh("sliced")
    with tf.Graph().as_default():
        init = np.arange(40, dtype=np.float32).reshape(10, 4)
        part = tf.compat.v1.get_variable(
            "part", initializer=tf.constant(init), partitioner=tf.compat.v1.fixed_size_partitioner(3))
        plain = tf.compat.v1.get_variable("plain", initializer=tf.constant([7, 8], tf.int32))
        saver = tf.compat.v1.train.Saver([part, plain])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, os.path.join(folder, "model"), write_meta_graph=False,
                       write_state=False)
    _dump(folder, os.path.join(folder, "model"))


def many_keys() -> None:
    """An index of two 256 KiB blocks (TensorFlow's table block size): 100 keys of 3000 bytes.

    Every file is stored gzipped (mostly repeated bytes); the tests unpack them into a temporary folder.
    """
    import gzip

    folder = _fresh("many_keys")
    variables = {f"{i:03d}_" + "k" * 3000: tf.Variable([float(i), -float(i)]) for i in range(100)}
    tf.train.Checkpoint(**variables).write(os.path.join(folder, "many"))
    _dump(folder, os.path.join(folder, "many"))
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        with open(path, "rb") as f, open(path + ".gz", "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as g:
                g.write(f.read())
        os.remove(path)


def tf_keras2() -> None:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tf_keras

    folder = _fresh("tf_keras2")
    tf.random.set_seed(0)
    model = tf_keras.Sequential([tf_keras.layers.Dense(4, activation="relu", input_shape=(3,)),
                                 tf_keras.layers.Dense(2)])
    optimizer = tf_keras.optimizers.legacy.Adam(0.01)  # slot variables: .OPTIMIZER_SLOT keys
    model.compile(optimizer=optimizer, loss="mse")
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    model.fit(x, np.ones((4, 2), np.float32), epochs=1, batch_size=2, verbose=0)
    tf.train.Checkpoint(model=model, optimizer=optimizer).save(os.path.join(folder, "ckpt"))
    _dump(folder, os.path.join(folder, "ckpt-1"))


def same_as_ours() -> None:
    """Checkpoints our writer also writes, byte for byte (tests/checkpoint/test_tf_format_write.py)."""
    folder = _fresh("same_as_ours")
    ckpt = tf.train.Checkpoint(v=tf.Variable([1.0, 2.0, 3.0]),
                               net={"w": tf.Variable([[1, 2], [3, 4]], dtype=tf.int32)},
                               step=tf.Variable(3, dtype=tf.int32))
    ckpt.write(os.path.join(folder, "plain"))
    _dump(folder, os.path.join(folder, "plain"))


FIXTURES = [dtypes, nested, manager, keras3, mirrored, sharded, sliced, many_keys, same_as_ours]


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    names = sys.argv[1:]
    for make in FIXTURES:
        if not names or make.__name__ in names:
            make()
            print("wrote", make.__name__)
    if not names or "tf_keras2" in names:
        # tf.keras 2 (tf_keras) in a fresh interpreter: TF_USE_LEGACY_KERAS must be set before import.
        import subprocess

        subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, %r); import "
                        "make_tf_checkpoint_fixtures as m; m.tf_keras2()" % os.path.dirname(
                            os.path.abspath(__file__))], check=True)
        print("wrote tf_keras2")


if __name__ == "__main__":
    main()
