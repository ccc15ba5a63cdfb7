# ruff: noqa  (a throwaway probe run by hand against TensorFlow; its printout is the reference)
"""TensorFlow 2.21 reference for tps.GradientTape (tests/variables/test_tape_surface.py).

Run: /work/tfvenv/bin/python tools/tf_tape_reference.py
"""
import os, copy
os.environ["TF_CPP_MIN_LOG_LEVEL"]="3"
import tensorflow as tf
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],[tf.config.LogicalDeviceConfiguration()]*2)
s = tf.distribute.MirroredStrategy(["/cpu:0","/cpu:1"])
def tryit(label, f):
    try:
        r = f(); print(label, "->", r if not hasattr(r,"numpy") else r.numpy())
    except Exception as e:
        print(label, "!!", type(e).__name__, str(e)[:300])
p = tf.Variable([1.,2.])
c = copy.copy(p); print("plain copy is", c is p)
with s.scope(): v = tf.Variable([1.,2.])
c = copy.copy(v); c.assign([5.,5.]); print("mirrored copy shares:", v.numpy(), type(c).__name__)
d = copy.deepcopy(p); print("deepcopy plain", d is p, d.name, d.device)
# tape
x = tf.constant(3.0)
with tf.GradientTape() as t:
    t.watch(x); y = x * x
    g = t.gradient(y, x)
    z = y * x
print("inside nonpersistent", g.numpy(), "watched after", t.gradient(z, x) if False else "")
tryit("after second", lambda: t.gradient(z, x))
with tf.GradientTape(persistent=True) as t:
    t.watch(x); y = x * x
    g = t.gradient(y, x)
    z = y * x
print("persist inside", g.numpy(), t.gradient(z, x).numpy())
with tf.GradientTape() as t:
    t.watch(x); y = x * x
    with t.stop_recording():
        z = y * x
    w = y * 2
tryit("stop_recording gradient z", lambda: t.gradient(z, x))
with tf.GradientTape(persistent=True) as t:
    t.watch(x); y = x * x
    t.reset()
    z = x * 5.
tryit("reset y", lambda: t.gradient(y, x))
tryit("reset z", lambda: t.gradient(z, x))
a = tf.Variable(2.0); b = tf.Variable(3.0)
with tf.GradientTape(watch_accessed_variables=False) as t:
    t.watch(a); y = a * b
print("wav", [g if g is None else g.numpy() for g in t.gradient(y, [a, b])], [v.name for v in t.watched_variables()])
with tf.GradientTape() as t:
    y = a * b + x
print("watched", [v.name for v in t.watched_variables()])
xs = tf.constant([[1.,2.],[3.,4.]])
with tf.GradientTape(persistent=True) as t:
    t.watch(xs); y = xs * xs
    ys = tf.reduce_sum(xs*xs, axis=1)
print("jac", t.jacobian(ys, xs).numpy().tolist())
print("bjac", t.batch_jacobian(y, xs).numpy().tolist())
tryit("jac unconnected", lambda: t.jacobian(ys, a))
tryit("jac unconnected zero", lambda: t.jacobian(ys, a, unconnected_gradients="zero"))
tryit("jac list", lambda: [j.numpy().shape for j in t.jacobian(ys, [xs, xs])])
tryit("bjac bad", lambda: t.batch_jacobian(ys, tf.constant(1.)))
tryit("bjac mismatch", lambda: t.batch_jacobian(tf.constant([[1.]]), xs))
tryit("jac nonpersistent pfor false", lambda: t.jacobian(ys, xs, experimental_use_pfor=False, parallel_iterations=2).shape)
with tf.GradientTape() as t1:
    with tf.GradientTape() as t2:
        t1.watch(x); t2.watch(x); y = x**3
    dy = t2.gradient(y, x)
print("second", dy.numpy(), t1.gradient(dy, x).numpy())
with tf.GradientTape() as t:
    t.watch(x); y = x * x
    print("nonpersist inside then", t.gradient(y, x).numpy())
tryit("after inside used", lambda: t.gradient(y, x))
