"""TensorFlow 2.21's results for ``tests/variables/test_tf_variable_references.py``.

Run with TensorFlow 2.21's interpreter (never imported by the library or the tests)::

    /work/tfvenv/bin/python tools/make_tf_variable_references.py

Writes ``tests/variables/fixtures/tf_variable_references.json`` and the
checkpoint TensorFlow writes for a SUM sync-on-read variable
(``tests/variables/fixtures/sum_on_read/``), on ``MirroredStrategy`` over
logical CPU devices:

- ``scatter_*`` on SUM / MEAN mirrored variables in a replica function
  (TensorFlow's ``mirrored_variable_test.testScatterDiv`` / ``testScatterMul``
  and variants): TensorFlow aggregates the ``IndexedSlices`` (SUM concatenates
  every replica's rows, MEAN also divides the values by the replica count), then
  applies the scatter once; ``scatter_min`` / ``max`` / ``update`` raise.
- ``scatter_*`` on sync-on-read variables (TensorFlow raises).
- save / restore of sync-on-read variables: what is saved (the aggregate) and
  what each replica holds after restoring (SUM: the saved value divided by the
  replica count, cast to the variable's dtype; others: the saved value).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "variables", "fixtures")

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 4)

ON_READ = tf.VariableSynchronization.ON_READ
AGG = tf.VariableAggregation


def _result(fn):
    try:
        return {"value": fn()}
    except Exception as e:  # noqa: BLE001 - the reference records TensorFlow's error
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        return {"error": type(e).__name__, "message": lines[-1][:300]}


def _locals(strategy, x):
    return [t.numpy().tolist() for t in strategy.experimental_local_results(x)]


def scatter_case(replicas, initial, dtype, aggregation, op, values_of, indices_of, sync="ON_WRITE"):
    """``v.<op>(IndexedSlices(values_of(rid), indices_of(rid)))`` in every replica."""
    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
    with strategy.scope():
        v = tf.Variable(tf.constant(initial, dtype), aggregation=getattr(AGG, aggregation),
                        synchronization=getattr(tf.VariableSynchronization, sync))

    def fn():
        def replica_fn():
            rid = tf.distribute.get_replica_context().replica_id_in_sync_group
            vals = tf.cast(tf.gather(tf.constant(values_of, tf.float64), [rid]), dtype)  # shape [1]
            idx = tf.gather(tf.constant(indices_of, tf.int32), [rid])
            getattr(v, op)(tf.IndexedSlices(values=vals, indices=idx, dense_shape=tf.constant([len(initial)])))
            return v.read_value()

        out = strategy.run(tf.function(replica_fn))
        return {"returned": _locals(strategy, out), "components": _locals(strategy, v)}

    return {"replicas": replicas, "initial": initial, "dtype": dtype.name, "aggregation": aggregation,
            "synchronization": sync, "op": op, "values": values_of, "indices": indices_of,
            "tf": _result(fn)}


def cross_replica_case(replicas, initial, aggregation, op, values, indices):
    """``v.<op>(IndexedSlices(values, indices))`` outside ``run`` (cross-replica context)."""
    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
    with strategy.scope():
        v = tf.Variable(tf.constant(initial, tf.float32), aggregation=getattr(AGG, aggregation))

    def fn():
        getattr(v, op)(tf.IndexedSlices(tf.constant(values, tf.float32), tf.constant(indices)))
        return {"components": _locals(strategy, v)}

    return {"replicas": replicas, "initial": initial, "dtype": "float32", "aggregation": aggregation,
            "op": op, "values": values, "indices": indices, "tf": _result(fn)}


def restore_case(replicas, components, dtype, aggregation, directory):
    """Sets a sync-on-read variable's components, saves, overwrites, restores."""
    devices = [f"/cpu:{i}" for i in range(replicas)]
    strategy = tf.distribute.MirroredStrategy(devices)
    with strategy.scope():
        v = tf.Variable(tf.zeros([], dtype), synchronization=ON_READ, aggregation=getattr(AGG, aggregation))
    strategy.run(lambda: v.assign(tf.cast(
        tf.gather(tf.constant(components, tf.float64),
                  [tf.distribute.get_replica_context().replica_id_in_sync_group])[0], dtype)))
    before = _locals(strategy, v)
    prefix = tf.train.Checkpoint(v=v).write(os.path.join(directory, "ckpt"))
    saved = tf.train.load_checkpoint(prefix).get_tensor("v/.ATTRIBUTES/VARIABLE_VALUE").tolist()
    strategy.run(lambda: v.assign(tf.zeros([], dtype)))
    tf.train.Checkpoint(v=v).read(prefix).assert_consumed()
    return {"replicas": replicas, "dtype": dtype.name, "aggregation": aggregation, "components": before,
            "saved": saved, "restored_components": _locals(strategy, v), "read": v.read_value().numpy().tolist(),
            "prefix": prefix}


def main():
    cases = {
        # TensorFlow's mirrored_variable_test.testScatterDiv (SUM, int32) and testScatterMul (MEAN, float32)
        "scatter_div_SUM_int32_R2": scatter_case(2, [1, 6, 1], tf.int32, "SUM", "scatter_div", [2, 3], [0, 1]),
        "scatter_mul_MEAN_float32_R2": scatter_case(2, [2.0, 1.0, 1.0], tf.float32, "MEAN", "scatter_mul",
                                                    [2, 3], [0, 1]),
        # variants: the other aggregation, 4 replicas, a row two replicas write
        "scatter_mul_SUM_float32_R2": scatter_case(2, [2.0, 1.0, 1.0], tf.float32, "SUM", "scatter_mul",
                                                   [2, 3], [0, 1]),
        "scatter_div_MEAN_float32_R2": scatter_case(2, [6.0, 6.0, 6.0], tf.float32, "MEAN", "scatter_div",
                                                    [2, 3], [0, 1]),
        "scatter_div_SUM_float32_R4_same_row": scatter_case(4, [48.0, 6.0, 1.0], tf.float32, "SUM", "scatter_div",
                                                            [2, 3, 4, 0.5], [0, 0, 1, 2]),
        "scatter_mul_MEAN_float32_R4_same_row": scatter_case(4, [1.0, 1.0, 1.0], tf.float32, "MEAN", "scatter_mul",
                                                             [2, 4, 6, 8], [0, 0, 1, 2]),
        "scatter_mul_ONLY_FIRST_REPLICA_float32_R2": scatter_case(2, [2.0, 1.0, 1.0], tf.float32,
                                                                  "ONLY_FIRST_REPLICA", "scatter_mul", [2, 3], [0, 1]),
        "scatter_min_SUM_float32_R2": scatter_case(2, [2.0, 1.0, 1.0], tf.float32, "SUM", "scatter_min",
                                                   [2, 3], [0, 1]),
        "scatter_div_on_read_SUM_float32_R2": scatter_case(2, [1.0, 6.0, 1.0], tf.float32, "SUM", "scatter_div",
                                                           [2, 3], [0, 1], sync="ON_READ"),
    }
    cross = {
        "scatter_mul_SUM_cross_replica": cross_replica_case(2, [2.0, 1.0, 1.0], "SUM", "scatter_mul", [3.0], [1]),
        "scatter_div_MEAN_cross_replica": cross_replica_case(2, [2.0, 1.0, 1.0], "MEAN", "scatter_div", [4.0], [0]),
        "scatter_min_MEAN_cross_replica": cross_replica_case(2, [2.0, 1.0, 1.0], "MEAN", "scatter_min", [0.0], [0]),
    }
    ckpt_dir = os.path.join(FIXTURES, "sum_on_read")
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    os.makedirs(ckpt_dir)
    restores = {"sum_on_read_R2": restore_case(2, [4.0, 3.0], tf.float32, "SUM", ckpt_dir)}
    restores["sum_on_read_R2"]["prefix"] = "sum_on_read/ckpt"
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in {
            "sum_on_read_R4": (4, [1.0, 2.0, 3.0, 4.5], tf.float32, "SUM"),
            "sum_on_read_int32_R2": (2, [4, 3], tf.int32, "SUM"),
            "mean_on_read_R2": (2, [4.0, 3.0], tf.float32, "MEAN"),
            "first_on_read_R2": (2, [4.0, 3.0], tf.float32, "ONLY_FIRST_REPLICA"),
        }.items():
            restores[name] = restore_case(*args, tmp)
            restores[name].pop("prefix")
    out = {"tensorflow_version": tf.__version__, "generator": "tools/make_tf_variable_references.py",
           "scatter": cases, "cross_replica_scatter": cross, "restore": restores}
    with open(os.path.join(FIXTURES, "tf_variable_references.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
