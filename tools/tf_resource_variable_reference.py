# ruff: noqa  (a throwaway probe run by hand against TensorFlow; its printout is the reference)
"""TensorFlow 2.21 reference for tests/tf_ports/test_resource_variable_port.py (eager variable cases)."""
import os, copy
os.environ["TF_CPP_MIN_LOG_LEVEL"]="3"
import tensorflow as tf, numpy as np
def t(label, f):
    try:
        r=f(); print(label, "->", r.numpy().tolist() if hasattr(r,"numpy") else r)
    except Exception as e: print(label, "!!", type(e).__name__, str(e)[:160])
v=tf.Variable([1.,2.,3.,4.,5.,6.,7.,8.]); t("nd_add", lambda: v.scatter_nd_add([[4],[3],[1],[7]],[9.,10.,11.,12.]))
v=tf.Variable([1.,2.,3.,4.,5.,6.,7.,8.]); t("nd_sub", lambda: v.scatter_nd_sub([[4],[3],[1],[7]],[9.,10.,11.,12.]))
v=tf.Variable([1.,2.,3.,4.,5.,6.,7.,8.]); t("nd_update", lambda: v.scatter_nd_update([[4],[3],[1],[7]],[9.,10.,11.,12.]))
v=tf.Variable([1.,2.,3.,4.,5.,6.,7.,8.]); t("nd_max", lambda: v.scatter_nd_max([[4],[3],[1],[7]],[9.,1.,11.,1.]))
v=tf.Variable([1.,2.,3.,4.,5.,6.,7.,8.]); t("nd_min", lambda: v.scatter_nd_min([[4],[3],[1],[7]],[9.,1.,11.,1.]))
init=np.reshape(np.arange(200.),[10,20]); v=tf.Variable(init); t("sparse_read", lambda: (v.sparse_read([0,3,1,2]).numpy()==init[[0,3,1,2]]).all())
v=tf.Variable([[1.,2.],[3.,4.]])
with tf.GradientTape() as tape:
    l = tf.gather_nd(v, [[1,1]])
t("grad gather_nd", lambda: tf.convert_to_tensor(tape.gradient(l, v)))
with tf.GradientTape() as tape:
    l = v.sparse_read([1])
t("grad sparse_read", lambda: tf.convert_to_tensor(tape.gradient(l, v)))
v=tf.Variable([[2.]]); t("scatter_div scalar", lambda: v.scatter_div(tf.IndexedSlices(tf.constant(2.), tf.constant([0]))))
v=tf.Variable([1.,2.]); t("assign wrong shape", lambda: v.assign([1.,2.,3.]))
v=tf.Variable(1); t("assign float to int", lambda: v.assign(1.5))
v=tf.Variable([True, False]); t("bool scatter", lambda: v.scatter_update(tf.IndexedSlices([True],[1])))
v=tf.Variable(1.0); c=copy.deepcopy(v); v.assign(2.0); t("deepcopy", lambda: (c.numpy(), v.numpy()))
v=tf.Variable([[1,2],[3,4]]); t("gather_nd", lambda: v.gather_nd([[0,1],[1,0]]))
v=tf.Variable([[1,2],[3,4]]); t("gather_nd rows", lambda: v.gather_nd([[1]]))
v=tf.Variable([1.,2.]); t("scatter oob", lambda: v.scatter_add(tf.IndexedSlices([1.],[5])))
v=tf.Variable(2.0); t("pow", lambda: v ** 3); t("rpow", lambda: 3 ** v); t("neg", lambda: -v); t("abs", lambda: abs(tf.Variable(-2.)))
v=tf.Variable([1,2,3]); t("iter len", lambda: len(list(v)))
v=tf.Variable([[1.]]); t("scatter_sub", lambda: v.scatter_sub(tf.IndexedSlices([[3.]],[0])))
v=tf.Variable([[1.]]); t("scatter_mul", lambda: v.scatter_mul(tf.IndexedSlices([[5.]],[0])))
v=tf.Variable([[6.]]); t("scatter_div", lambda: v.scatter_div(tf.IndexedSlices([[3.]],[0])))
v=tf.Variable([[6.]]); t("scatter_min", lambda: v.scatter_min(tf.IndexedSlices([[3.]],[0])))
v=tf.Variable([[6.]]); t("scatter_max", lambda: v.scatter_max(tf.IndexedSlices([[3.]],[0])))
v=tf.Variable([[1.]]); t("scatter_add scalar", lambda: v.scatter_add(tf.IndexedSlices(tf.constant(1.), tf.constant([0]))))
v=tf.Variable(np.zeros([2,3],np.float32)); t("scatter_update row", lambda: v.scatter_update(tf.IndexedSlices([[1.,2.,3.]],[1])))
