"""Checks that TensorFlow 2.21 reads back the checkpoints we write with ``format="tensorflow"``.

Run with TensorFlow's interpreter; it runs our side in the project's own
virtual environment (which never imports TensorFlow)::

    /work/tfvenv/bin/python tools/check_tf_reads_ours.py [--ours .venv/bin/python]

Our side (``--write FOLDER``, in the project's interpreter) writes:

- ``plain``: variables of several dtypes (incl. bfloat16, bool, complex,
  a string) with ``Checkpoint.write``;
- ``nested/ckpt-1``, ``nested/ckpt-2``: a nested object graph saved twice
  with ``Checkpoint.save`` (``save_counter``, the ``checkpoint`` state file);
- ``keras/ckpt-1``: a Keras 3 model with its Adam state after two steps;
- ``mirrored``: a MirroredStrategy's mirrored and sync-on-read variables;
- ``managed/ckpt-2``, ``managed/ckpt-3``: three saves of a
  ``CheckpointManager(..., max_to_keep=2, format="tensorflow")`` (the
  ``checkpoint`` state file with its history);
- ``sharded/managed/ckpt-3``, ``sharded/plain``: the same written by a
  2-process job (``tests/checkpoint/worker_tf_sharded.py`` under
  ``python -m tpustrategy.launch -n 2``): TensorFlow's sharded bundle, one
  ``.data-0000k-of-00002`` per process and one index.

TensorFlow's side then checks ``tf.train.load_checkpoint`` values,
``tf.train.latest_checkpoint``, and ``tf.train.Checkpoint(...).restore(...)
.assert_consumed()`` (``read`` for what ``write`` wrote, as TensorFlow pairs them) into TensorFlow objects of the same structure (the
same Keras architecture, whose predictions must then equal ours). Exits 0
when everything matched.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def write_ours(folder: str) -> None:
    """Our side: runs in the project's environment (JAX, no TensorFlow)."""
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    os.environ["KERAS_BACKEND"] = "jax"
    import keras
    import ml_dtypes
    import numpy as np

    import tpustrategy as tps

    expected: dict = {}
    ckpt = tps.train.Checkpoint(
        f32=tps.Variable(np.array([1.5, -2.0], np.float32)),
        bf16=tps.Variable(np.array([1.0, -3.5, 0.0078125], ml_dtypes.bfloat16)),
        i32=tps.Variable(np.array([[1, -2], [3, 4]], np.int32)),
        b=tps.Variable(np.array([True, False])),
        c64=tps.Variable(np.array([1 + 2j], np.complex64)),
        arr=np.arange(6, dtype=np.float32).reshape(2, 3),
        name="a string",
    )
    ckpt.write(os.path.join(folder, "plain"), format="tensorflow")

    class Dense:
        def __init__(self, n_in: int, n_out: int, seed: int):
            rng = np.random.default_rng(seed)
            self.kernel = tps.Variable(rng.standard_normal((n_in, n_out)).astype(np.float32))
            self.bias = tps.Variable(np.arange(n_out, dtype=np.float32))

    class Net:
        def __init__(self):
            self.l1 = Dense(3, 4, 1)
            self.l2 = Dense(4, 2, 2)

    net = Net()
    nested = tps.train.Checkpoint(net=net, extra={"lr": tps.Variable(np.float32(0.125))})
    nested.save(os.path.join(folder, "nested", "ckpt"), format="tensorflow")
    net.l1.bias.assign(np.full(4, 9.0, np.float32))
    nested.save(os.path.join(folder, "nested", "ckpt"), format="tensorflow")
    expected["nested_l1_bias"] = [9.0] * 4
    expected["nested_l2_kernel"] = np.asarray(net.l2.kernel.numpy()).tolist()

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(2)])
    optimizer = keras.optimizers.Adam(0.01)
    model.compile(optimizer=optimizer, loss="mse")
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    model.fit(x, np.ones((4, 2), np.float32), epochs=1, batch_size=2, verbose=0)
    tps.train.Checkpoint(model=model, optimizer=optimizer).save(
        os.path.join(folder, "keras", "ckpt"), format="tensorflow")
    expected["keras_x"] = x.tolist()
    expected["keras_predictions"] = np.asarray(model.predict(x, verbose=0)).tolist()
    expected["keras_optimizer"] = [np.asarray(v).tolist() for v in optimizer.variables]

    strategy = tps.MirroredStrategy()
    with strategy.scope():
        w = tps.Variable(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
        total = tps.Variable(np.float32(0), synchronization=tps.VariableSynchronization.ON_READ,
                             aggregation=tps.VariableAggregation.SUM)
    strategy.run(lambda: total.assign_add(1.5))
    tps.train.Checkpoint(w=w, total=total).write(os.path.join(folder, "mirrored"), format="tensorflow")
    expected["mirrored_total"] = float(total.numpy())

    step = tps.Variable(np.int32(0))
    weights = tps.Variable(np.zeros(3, np.float32))
    manager = tps.train.CheckpointManager(tps.train.Checkpoint(step=step, weights=weights),
                                          os.path.join(folder, "managed"), max_to_keep=2, format="tensorflow")
    for i in range(1, 4):
        step.assign(np.int32(i))
        weights.assign(np.full(3, i / 4, np.float32))
        manager.save()
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump(expected, f)


def check_with_tf(folder: str) -> list[str]:
    """TensorFlow's side: returns the failures."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import numpy as np
    import tensorflow as tf

    failures: list[str] = []
    expected = json.load(open(os.path.join(folder, "expected.json")))

    def check(name: str, ok: bool, detail: str = "") -> None:
        print(("ok   " if ok else "FAIL ") + name + (f": {detail}" if detail and not ok else ""))
        if not ok:
            failures.append(name)

    reader = tf.train.load_checkpoint(os.path.join(folder, "plain"))
    value = reader.get_tensor("bf16/.ATTRIBUTES/VARIABLE_VALUE")
    check("plain: bfloat16 read", reader.get_variable_to_dtype_map()["bf16/.ATTRIBUTES/VARIABLE_VALUE"]
          == tf.bfloat16 and value.astype(np.float32).tolist() == [1.0, -3.5, 0.0078125])
    check("plain: string read", reader.get_tensor("name/.ATTRIBUTES/VARIABLE_VALUE") == b"a string")
    check("plain: complex read", reader.get_tensor("c64/.ATTRIBUTES/VARIABLE_VALUE").tolist() == [1 + 2j])
    check("plain: array read", reader.get_tensor("arr/.ATTRIBUTES/VARIABLE_VALUE").tolist()
          == [[0, 1, 2], [3, 4, 5]])
    tf_plain = tf.train.Checkpoint(
        f32=tf.Variable(tf.zeros(2)), bf16=tf.Variable(tf.zeros(3, tf.bfloat16)),
        i32=tf.Variable(tf.zeros((2, 2), tf.int32)), b=tf.Variable([False, False]),
        c64=tf.Variable(tf.zeros(1, tf.complex64)), arr=tf.Variable(tf.zeros((2, 3))),
        name=tf.Variable(""))
    try:
        # write() (no save_counter) pairs with read(), as in TensorFlow.
        tf_plain.read(os.path.join(folder, "plain")).assert_consumed()
        check("plain: read().assert_consumed()", tf_plain.f32.numpy().tolist() == [1.5, -2.0]
              and tf_plain.name.numpy() == b"a string")
    except Exception as e:  # noqa: BLE001 - reported
        check("plain: read().assert_consumed()", False, repr(e))

    nested_dir = os.path.join(folder, "nested")
    latest = tf.train.latest_checkpoint(nested_dir)
    check("nested: latest_checkpoint", latest is not None and latest.endswith("ckpt-2"), str(latest))
    state = tf.train.get_checkpoint_state(nested_dir)
    text = open(os.path.join(nested_dir, "checkpoint")).read()
    check("nested: state file relative paths", 'model_checkpoint_path: "ckpt-2"' in text, text)

    class TFDense(tf.Module):
        def __init__(self, n_in: int, n_out: int):
            super().__init__()
            self.kernel = tf.Variable(tf.zeros((n_in, n_out)))
            self.bias = tf.Variable(tf.zeros(n_out))

    class TFNet(tf.Module):
        def __init__(self):
            super().__init__()
            self.l1 = TFDense(3, 4)
            self.l2 = TFDense(4, 2)

    tf_net = TFNet()
    tf_nested = tf.train.Checkpoint(net=tf_net, extra={"lr": tf.Variable(0.0)})
    try:
        tf_nested.restore(state.model_checkpoint_path).assert_consumed()
        check("nested: restore().assert_consumed()",
              tf_net.l1.bias.numpy().tolist() == expected["nested_l1_bias"]
              and np.allclose(tf_net.l2.kernel.numpy(), expected["nested_l2_kernel"])
              and int(tf_nested.save_counter.numpy()) == 2
              and float(tf_nested.extra["lr"].numpy()) == 0.125)
    except Exception as e:  # noqa: BLE001 - reported
        check("nested: restore().assert_consumed()", False, repr(e))

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(2)])
    optimizer = keras.optimizers.Adam(0.01)
    optimizer.build(model.trainable_variables)
    keras_path = tf.train.latest_checkpoint(os.path.join(folder, "keras"))
    check("keras: iterations is int64", tf.train.load_checkpoint(keras_path).get_variable_to_dtype_map()
          .get("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == tf.int64)
    try:
        tf.train.Checkpoint(model=model, optimizer=optimizer).restore(keras_path).assert_consumed()
        x = np.asarray(expected["keras_x"], np.float32)
        same = np.allclose(model.predict(x, verbose=0), expected["keras_predictions"], atol=1e-6)
        slots = all(np.allclose(np.asarray(v), e) for v, e in zip(optimizer.variables, expected["keras_optimizer"]))
        check("keras: restore().assert_consumed(), predictions and Adam state", same and slots)
    except Exception as e:  # noqa: BLE001 - reported
        check("keras: restore().assert_consumed()", False, repr(e))

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        w = tf.Variable(tf.zeros((2, 2)))
        total = tf.Variable(0.0, synchronization=tf.VariableSynchronization.ON_READ,
                            aggregation=tf.VariableAggregation.SUM)
    try:
        tf.train.Checkpoint(w=w, total=total).read(os.path.join(folder, "mirrored")).assert_consumed()
        check("mirrored: read().assert_consumed()", float(total.numpy()) == expected["mirrored_total"]
              and w.numpy().tolist() == [[1, 2], [3, 4]])
    except Exception as e:  # noqa: BLE001 - reported
        check("mirrored: read().assert_consumed()", False, repr(e))

    managed = os.path.join(folder, "managed")
    state = tf.train.get_checkpoint_state(managed)
    names = [os.path.basename(p) for p in state.all_model_checkpoint_paths] if state else None
    check("managed: get_checkpoint_state history", names == ["ckpt-2", "ckpt-3"], str(names))
    check("managed: ckpt-1 deleted", not any(n.startswith("ckpt-1.") for n in os.listdir(managed)),
          str(os.listdir(managed)))
    tf_step, tf_weights = tf.Variable(0), tf.Variable(tf.zeros(3))
    tf_ckpt = tf.train.Checkpoint(step=tf_step, weights=tf_weights)
    tf_manager = tf.train.CheckpointManager(tf_ckpt, managed, max_to_keep=2)
    check("managed: TF CheckpointManager finds the history",
          [os.path.basename(p) for p in tf_manager.checkpoints] == ["ckpt-2", "ckpt-3"],
          str(tf_manager.checkpoints))
    try:
        tf_ckpt.restore(tf_manager.latest_checkpoint).assert_consumed()
        check("managed: restore(latest).assert_consumed()", int(tf_step.numpy()) == 3
              and tf_weights.numpy().tolist() == [0.75] * 3 and int(tf_ckpt.save_counter.numpy()) == 3)
        tf_manager.save()  # TensorFlow continues the numbering and the history
        names = [os.path.basename(p) for p in tf.train.get_checkpoint_state(managed).all_model_checkpoint_paths]
        check("managed: TF saves on after ours", names == ["ckpt-3", "ckpt-4"], str(names))
    except Exception as e:  # noqa: BLE001 - reported
        check("managed: restore(latest).assert_consumed()", False, repr(e)[:600])

    sharded = os.path.join(folder, "sharded", "managed")
    data = sorted(n for n in os.listdir(sharded) if n.startswith("ckpt-3.data"))
    check("sharded: one data file per process", data == ["ckpt-3.data-00000-of-00002",
                                                          "ckpt-3.data-00001-of-00002"], str(data))
    names = [os.path.basename(p) for p in tf.train.get_checkpoint_state(sharded).all_model_checkpoint_paths]
    check("sharded: history", names == ["ckpt-2", "ckpt-3"], str(names))
    tf_w, tf_b, tf_step = tf.Variable(tf.zeros((4, 3))), tf.Variable(tf.zeros(5)), tf.Variable(0)
    tf_ckpt = tf.train.Checkpoint(model={"w": tf_w, "b": tf_b}, step=tf_step)
    try:
        tf_ckpt.restore(tf.train.latest_checkpoint(sharded)).assert_consumed()
        check("sharded: restore(latest).assert_consumed()",
              tf_w.numpy().tolist() == (np.arange(12).reshape(4, 3) * 3).tolist()
              and tf_b.numpy().tolist() == [-3.0] * 5 and int(tf_step.numpy()) == 3
              and int(tf_ckpt.save_counter.numpy()) == 3)
        reader = tf.train.load_checkpoint(os.path.join(folder, "sharded", "plain"))
        check("sharded: load_checkpoint of a write()", int(reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE")) == 3)
    except Exception as e:  # noqa: BLE001 - reported
        check("sharded: restore(latest).assert_consumed()", False, repr(e)[:600])
    return failures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", help="(our side) write the checkpoints into this folder")
    parser.add_argument("--ours", default=os.path.join(ROOT, ".venv", "bin", "python"))
    args = parser.parse_args()
    if args.write:
        sys.path.insert(0, ROOT)
        write_ours(args.write)
        return
    folder = tempfile.mkdtemp(prefix="tps-tf-format-")
    subprocess.run([args.ours, os.path.abspath(__file__), "--write", folder], check=True, cwd=ROOT)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    subprocess.run([args.ours, "-m", "tpustrategy.launch", "-n", "2", "--devices-per-process", "2", "--timeout",
                    "300", os.path.join(ROOT, "tests", "checkpoint", "worker_tf_sharded.py"),
                    os.path.join(folder, "sharded")], check=True, cwd=ROOT, env=env)
    failures = check_with_tf(folder)
    print(f"{len(failures)} failures" if failures else "TensorFlow read back everything")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
