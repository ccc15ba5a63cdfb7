# ruff: noqa  (a throwaway probe run by hand against TensorFlow; its printout is the reference)
"""TensorFlow 2.21 reference for tps.Variable's sparse ops, copies and members (tests/variables/test_sparse_ops.py).

Run with the TensorFlow venv: /work/tfvenv/bin/python tools/tf_variable_members_reference.py
It prints what TensorFlow does; the numbers are written into the tests by hand.
"""
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"]="3"
import tensorflow as tf
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],[tf.config.LogicalDeviceConfiguration()]*2)
s = tf.distribute.MirroredStrategy(["/cpu:0","/cpu:1"])
def tryit(label, f):
    try:
        r = f(); print(label, "->", r if not hasattr(r,"numpy") else r.numpy())
    except Exception as e:
        print(label, "!!", type(e).__name__, str(e)[:200])
for agg in ["NONE","SUM","MEAN","ONLY_FIRST_REPLICA"]:
    with s.scope():
        v = tf.Variable([1.,2.,3.,4.], aggregation=getattr(tf.VariableAggregation,agg))
    def rep(op):
        def fn():
            rid = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)
            getattr(v, op)(tf.IndexedSlices(tf.stack([10.+rid]), tf.constant([1])))
        return fn
    for op in ["scatter_add","scatter_update","scatter_max","scatter_sub"]:
        v.assign([1.,2.,3.,4.])
        tryit(f"{agg} replica {op}", lambda: (s.run(tf.function(rep(op))), v.numpy())[1])
    v.assign([1.,2.,3.,4.])
    tryit(f"{agg} cross scatter_add", lambda: (v.scatter_add(tf.IndexedSlices([5.],[0])), v.numpy())[1])
    v.assign([1.,2.,3.,4.])
    tryit(f"{agg} cross scatter_nd_add", lambda: (v.scatter_nd_add([[0]],[5.]), [x.numpy() for x in v.values])[1])
    v.assign([1.,2.,3.,4.])
    def nd():
        rid = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)
        v.scatter_nd_add([[1]], tf.stack([10.+rid]))
    tryit(f"{agg} replica scatter_nd_add", lambda: (s.run(tf.function(nd)), [x.numpy() for x in v.values])[1])
    tryit(f"{agg} sparse_read", lambda: v.sparse_read([0,2]))
    tryit(f"{agg} gather_nd", lambda: v.gather_nd([[1],[3]]))
    tryit(f"{agg} batch_scatter_update", lambda: v.batch_scatter_update(tf.IndexedSlices([7.],[2])))
with s.scope():
    r = tf.Variable([1.,2.], synchronization=tf.VariableSynchronization.ON_READ, aggregation=tf.VariableAggregation.SUM)
tryit("onread cross scatter_add", lambda: r.scatter_add(tf.IndexedSlices([5.],[0])))
tryit("onread replica scatter_add", lambda: s.run(tf.function(lambda: r.scatter_add(tf.IndexedSlices([5.],[0])))))
tryit("onread cross scatter_nd_add", lambda: (r.scatter_nd_add([[0]],[5.]), [x.numpy() for x in r.values])[1])
tryit("onread sparse_read", lambda: r.sparse_read([0]))
tryit("onread replica sparse_read", lambda: s.run(tf.function(lambda: r.sparse_read([0]))))
p = tf.Variable([1,2,3])
tryit("plain &", lambda: p & 6)
tryit("plain rand", lambda: 6 & p)
tryit("plain ^", lambda: p ^ 1)
tryit("plain iter", lambda: [x.numpy() for x in p])
tryit("scatter not slices", lambda: p.scatter_add(([0],[1])))
tryit("device", lambda: p.device)
tryit("mirrored device", lambda: v.device)
tryit("initial_value", lambda: v.initial_value)
tryit("get_shape", lambda: v.get_shape())
tryit("ref", lambda: (v.ref(), v.ref().deref() is v, v.ref()==v.ref(), hash(v.ref())==hash(v.ref())))
import copy
tryit("copy", lambda: (type(copy.copy(v)).__name__, copy.copy(v) is v, copy.copy(v).name))
w = copy.deepcopy(v)
tryit("deepcopy", lambda: (type(w).__name__, w is v, w.name, w.numpy(), w.aggregation, w.values[1].device))
w.assign([9.,9.,9.,9.]); print(v.numpy())
tryit("deepcopy onread", lambda: (type(copy.deepcopy(r)).__name__, copy.deepcopy(r).numpy()))
tryit("deepcopy plain", lambda: (type(copy.deepcopy(p)).__name__, copy.deepcopy(p).numpy(), copy.deepcopy(p).name, copy.deepcopy(p).trainable))
tryit("scatter_nd_max plain", lambda: p.scatter_nd_max([[0]],[5]).numpy())
tryit("scatter_div int", lambda: p.scatter_div(tf.IndexedSlices([2],[2])).numpy())
tryit("iter scalar", lambda: list(tf.Variable(1.0)))
tryit("batch_scatter_update 2d", lambda: tf.Variable([[1.,2.,3.],[4.,5.,6.]]).batch_scatter_update(tf.IndexedSlices([[7.],[8.]],[[0],[2]])).numpy())
