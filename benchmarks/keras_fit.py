"""Keras 3 under tpustrategy: ``fit``, a Keras model in ``tps.function``, ``steps_per_execution``.

Model: a Keras MLP 64 -> 256 -> 256 -> 10 (sparse softmax cross-entropy from
logits, SGD 0.01), global batch 512 over 8 replicas, every side starting from the
same weights. The pipeline is ``tpsd.Dataset.from_tensor_slices((x, y)).repeat()
.batch(512)`` over 16 batches of data, so each call of S = 16 steps sees every
example once, in the same order, on every side. A measurement is 4 such calls
(64 steps): Keras's own ``DataParallel`` loop dispatches step after step
without waiting, and on fake CPU devices more than ~32 queued programs with
collectives lock XLA's CPU collectives up, so its calls are kept at 16 steps;
every side makes the same calls.

Rows:
  fit vs tps.function loop       steps/s (higher is better), goal >= 0.95:
                                 ``model.fit(ds, steps_per_epoch=S)`` of a model
                                 built under ``strategy.scope()`` vs TensorFlow's
                                 custom-training loop renamed (``tps.GradientTape``,
                                 ``keras.optimizers.SGD``, ``tps.function`` +
                                 ``strategy.run``) over the same model and
                                 pipeline, iterated with at most 4 steps in flight.
  fit vs Keras DataParallel      steps/s (higher is better), goal >= 1.05: the
                                 same ``fit`` vs Keras's own
                                 ``keras.distribution.DataParallel`` over the same
                                 8 devices, fed the same arrays (Keras's array
                                 adapter, ``batch_size=512, shuffle=False``).
  fit(arrays) vs DataParallel    steps/s, goal >= 1.05: ``fit`` under the strategy
                                 fed those same NumPy arrays (Keras's array adapter
                                 on both sides: no pipeline difference).
  Keras model in tps.function    s/step (lower is better), goal <= 1.03: the
                                 custom-loop step on one batch already on the
                                 devices, vs the same step hand-written in JAX
                                 (``jax.jit`` of ``model.stateless_call`` +
                                 ``jax.value_and_grad`` + ``optimizer.stateless_apply``,
                                 batch split over ``"replica"``, state donated),
                                 both synchronised (each loss waited on).
  steps_per_execution=8 vs 1     µs/step (lower is better), goal <= 0.5 (a 2x
                                 speed-up): ``fit`` of a tiny model (8 -> 1, batch
                                 64) for 128 steps per call, one program per 8 steps
                                 vs one per step.
  bare programs, 8 vs 1          µs/step: the same model's Keras train step
                                 jitted alone, 8 unrolled vs 1, on a batch already
                                 on the devices (each call waited on): the
                                 device-side ceiling of the row above.
  steps_per_execution=8, fit vs  µs/step, goal <= 1.05 (within 5 %): ``fit`` with
  the bare 8-step program        ``steps_per_execution=8`` vs a hand-written loop
                                 over the same pipeline doing the same work: 8
                                 batches taken and each ``device_put`` split over
                                 the replicas, one call of the 8-step program
                                 (``jax.jit`` of 8 unrolled Keras train steps,
                                 state donated), at most 4 calls in flight, the
                                 state waited on at the end: what Keras's loop and
                                 ours add around the program.

Every timed call is waited on (``fit``: the model's variables after it returns).
All sides of a row run interleaved, round by round, in one process; at the end
the fit, loop, DataParallel and hand-written sides must hold the same weights
(they took the same steps on the same data).
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

_common.setup_devices(8)
os.environ["KERAS_BACKEND"] = "jax"

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import tpustrategy as tps  # noqa: E402
import tpustrategy.data as tpsd  # noqa: E402

SIZES = (64, 256, 256, 10)
GLOBAL_BATCH = 512
S = 16  # steps per fit call (one pass over the data)
CALLS = 4  # fit calls per measurement (see the module docstring)
LR = 0.01
TINY_STEPS = 128
ROWS = ("steps/s: fit under the strategy vs a tps.function custom loop (same model, pipeline)",
        "steps/s: fit under the strategy vs Keras DataParallel fit (same devices, data)",
        "steps/s: fit(NumPy arrays) under the strategy vs Keras DataParallel fit (same arrays)",
        "Keras model in tps.function (tps.GradientTape) vs hand-written jit step, synchronised",
        "steps_per_execution=8 vs 1: fit of a tiny model, time per step",
        "steps_per_execution=8 vs 1: the bare programs of that model (data on device), time per step",
        "steps_per_execution=8: fit vs the bare 8-step program fed from the same pipeline, time per step")


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(S * GLOBAL_BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], size=S * GLOBAL_BATCH).astype(np.int32)
    return x, y


def create_model(keras):
    layers = [keras.Input((SIZES[0],))]
    layers += [keras.layers.Dense(n, activation="relu") for n in SIZES[1:-1]]
    return keras.Sequential([*layers, keras.layers.Dense(SIZES[-1])])


def loss_object(keras, reduction="sum_over_batch_size"):
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)


def fitted(keras, weights, steps_per_execution=1, model_fn=create_model):
    model = model_fn(keras)
    model.set_weights(weights)
    model.compile(optimizer=keras.optimizers.SGD(LR), loss=loss_object(keras),
                  steps_per_execution=steps_per_execution)
    return model


def fit_cases(keras, strategy, weights, x, y):
    """fit under the strategy, the tps.function loop, Keras DataParallel: callables of S steps."""
    ds = tpsd.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH)
    with strategy.scope():
        fit_model = fitted(keras, weights)
        arrays_model = fitted(keras, weights)
        loop_model = create_model(keras)
        loop_model.set_weights(weights)
        optimizer = keras.optimizers.SGD(LR)
        per_example = loss_object(keras, reduction=None)

    def train_step(inputs):
        features, labels = inputs
        with tps.GradientTape() as tape:
            loss = tps.nn.compute_average_loss(per_example(labels, loop_model(features, training=True)),
                                               global_batch_size=GLOBAL_BATCH)
        grads = tape.gradient(loss, loop_model.trainable_variables)
        optimizer.apply_gradients(zip(grads, loop_model.trainable_variables))
        return loss

    @tps.function
    def distributed_train_step(inputs):
        return strategy.reduce(tps.ReduceOp.SUM, strategy.run(train_step, args=(inputs,)), axis=None)

    dp = keras.distribution.DataParallel(devices=jax.devices())
    with dp.scope():
        dp_model = fitted(keras, weights)

    def run_fit():
        for _ in range(CALLS):
            fit_model.fit(ds, epochs=1, steps_per_epoch=S, verbose=0)
        return _common.wait([v.value for v in fit_model.trainable_variables])

    def run_arrays():
        for _ in range(CALLS):
            arrays_model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=1, steps_per_epoch=S, shuffle=False, verbose=0)
        return _common.wait([v.value for v in arrays_model.trainable_variables])

    def run_loop():
        seconds = 0.0
        for _ in range(CALLS):
            t0 = time.perf_counter()
            it = iter(strategy.experimental_distribute_dataset(ds))
            _common.timed_pipelined(lambda it=it: distributed_train_step(next(it)), S)
            seconds += time.perf_counter() - t0
        return seconds

    def run_dp():
        with dp.scope():
            for _ in range(CALLS):
                dp_model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=1, steps_per_epoch=S, shuffle=False, verbose=0)
            return _common.wait([v.value for v in dp_model.trainable_variables])

    models = {"fit": fit_model, "arrays": arrays_model, "loop": loop_model, "keras_dp": dp_model}
    return {"fit": run_fit, "arrays": run_arrays, "loop": run_loop, "keras_dp": run_dp}, models


def step_cases(keras, strategy, weights, x, y):
    """The custom-loop step on one batch vs the hand-written jit step: one-step callables and a check."""
    with strategy.scope():
        model = create_model(keras)
        model.set_weights(weights)
        optimizer = keras.optimizers.SGD(LR)
        per_example = loss_object(keras, reduction=None)
    batch = next(iter(strategy.experimental_distribute_dataset(
        tpsd.Dataset.from_tensor_slices((x[:GLOBAL_BATCH], y[:GLOBAL_BATCH])).batch(GLOBAL_BATCH))))

    def train_step(features, labels):
        with tps.GradientTape() as tape:
            loss = tps.nn.compute_average_loss(per_example(labels, model(features, training=True)),
                                               global_batch_size=GLOBAL_BATCH)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tps.function
    def ours_step(inputs):
        return strategy.reduce(tps.ReduceOp.SUM, strategy.run(train_step, args=inputs), axis=None)

    hand_model = create_model(keras)   # outside any scope: plain Keras variables
    hand_model.set_weights(weights)
    hand_opt = keras.optimizers.SGD(LR)
    hand_opt.build(hand_model.trainable_variables)
    mean_loss = loss_object(keras)
    mesh = strategy.mesh
    replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("replica"))

    def hand_train(state, xb, yb):
        tv, ntv, ov = state

        def loss_fn(tv):
            logits, _ = hand_model.stateless_call(tv, ntv, xb, training=True)
            return mean_loss(yb, logits)

        loss, grads = jax.value_and_grad(loss_fn)(tv)
        tv, ov = hand_opt.stateless_apply(ov, grads, tv)
        return loss, (tv, ntv, ov)

    hand_jit = jax.jit(hand_train, donate_argnums=0, out_shardings=(replicated, replicated))
    st = {"hand": jax.device_put(([v.value for v in hand_model.trainable_variables],
                                  [v.value for v in hand_model.non_trainable_variables],
                                  [v.value for v in hand_opt.variables]), replicated)}
    xs = jax.device_put(x[:GLOBAL_BATCH], split)
    ys = jax.device_put(y[:GLOBAL_BATCH], split)
    last = {}

    def ours():
        last["ours"] = out = ours_step(batch)
        return out

    def hand():
        loss, st["hand"] = hand_jit(st["hand"], xs, ys)
        last["hand"] = loss
        return loss

    def check():
        np.testing.assert_allclose(float(np.asarray(last["ours"])), float(np.asarray(last["hand"])), rtol=1e-4)
        for v, w in zip(model.trainable_variables, st["hand"][0]):
            np.testing.assert_allclose(v.numpy(), np.asarray(w), rtol=2e-4, atol=2e-5, err_msg=v.path)

    return {"ours": ours, "hand": hand}, check


def tiny_model(keras):
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])


def spe_cases(keras, strategy):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(TINY_STEPS * 64, 8)).astype(np.float32)
    y = (x @ rng.normal(size=(8, 1))).astype(np.float32)
    ds = tpsd.Dataset.from_tensor_slices((x, y)).repeat().batch(64)
    keras.utils.set_random_seed(2)
    weights = tiny_model(keras).get_weights()
    models = {}
    for k in (8, 1):
        with strategy.scope():
            models[k] = model = tiny_model(keras)
            model.set_weights(weights)
            model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", steps_per_execution=k)

    def run(k):
        models[k].fit(ds, epochs=1, steps_per_epoch=TINY_STEPS, verbose=0)
        return _common.wait([v.value for v in models[k].trainable_variables])

    from tpustrategy._src.keras import steps

    model = models[8]
    split = NamedSharding(strategy.mesh, P("replica"))
    fed = {"state": jax.tree.map(lambda a: a.copy(), (
        [v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
        [v.value for v in model.optimizer.variables], [v.value for v in model.metrics_variables]))}
    fed_program = jax.jit(steps._unrolled(model.train_step), donate_argnums=0,
                          out_shardings=(None, model._get_state_sharding_spec()))

    def run_fed():
        """fit's work without fit: the same pipeline, one device_put per batch, one 8-step program per 8 steps."""
        it = ds.as_numpy_iterator()
        pending: list = []
        for _ in range(TINY_STEPS // 8):
            batches = [tuple(jax.device_put(list(next(it)), split)) for _ in range(8)]
            logs, fed["state"] = fed_program(fed["state"], batches)
            pending.append(logs)
            if len(pending) > _common.PIPELINE_DEPTH:
                _common.wait(pending.pop(0))
        return _common.wait(fed["state"][0])

    def check():
        for a, b in zip(models[8].get_weights(), models[1].get_weights()):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        assert int(models[8].optimizer.iterations.numpy()) == int(models[1].optimizer.iterations.numpy())
        for v, w in zip(models[8].trainable_variables, fed["state"][0]):   # the same steps, the same data
            np.testing.assert_allclose(v.numpy(), np.asarray(w), rtol=1e-4, atol=1e-5, err_msg=v.path)

    def bare():
        """Keras's train step jitted alone, 8 unrolled vs 1, on one batch already on the devices: the
        device-side ceiling of what steps_per_execution can save (no input pipeline, no Keras loop)."""
        model = models[1]
        state = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
                 [v.value for v in model.optimizer.variables], [v.value for v in model.metrics_variables])
        shardings = (None, model._get_state_sharding_spec())
        one = jax.jit(model.train_step, out_shardings=shardings)
        many = jax.jit(steps._unrolled(model.train_step), out_shardings=shardings)
        split = NamedSharding(strategy.mesh, P("replica"))
        batch = (jax.device_put(x[:64], split), jax.device_put(y[:64], split))
        return {8: lambda: many(state, [batch] * 8)[0], 1: lambda: one(state, batch)[0]}

    return {8: lambda: run(8), 1: lambda: run(1), "fed": run_fed}, check, bare


def timed(fn):
    """Seconds of one call of ``fn`` (which waits on its own result)."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    args = _common.parser(__doc__.splitlines()[0]).parse_args()
    keras, missing = _common.optional_module("keras")
    if missing:
        _common.skip_all(list(ROWS), missing, args.json)
    rounds = 3 if args.quick else 21
    strategy = tps.MirroredStrategy()
    keras.utils.set_random_seed(0)
    weights = create_model(keras).get_weights()
    x, y = data()
    rows = []

    fits, models = fit_cases(keras, strategy, weights, x, y)
    for fn in fits.values():  # compile and warm up: one pass each
        fn()
    # run_loop returns its own seconds; the fit sides are timed here around the waited call
    steps = S * CALLS
    measure = {"fit": lambda: steps / timed(fits["fit"]), "arrays": lambda: steps / timed(fits["arrays"]),
               "loop": lambda: steps / fits["loop"](), "keras_dp": lambda: steps / timed(fits["keras_dp"])}
    res = _common.side_by_side(measure, rounds)
    rows.append(_common.row(ROWS[0], res["fit"], res["loop"], "steps/s", higher_is_better=True,
                            note="goal >= 0.95"))
    rows.append(_common.row(ROWS[1], res["fit"], res["keras_dp"], "steps/s", higher_is_better=True,
                            note="goal >= 1.05"))
    rows.append(_common.row(ROWS[2], res["arrays"], res["keras_dp"], "steps/s", higher_is_better=True,
                            note="goal >= 1.05"))
    ref = models["keras_dp"].get_weights()
    for name in ("fit", "arrays", "loop"):
        for a, b in zip(models[name].get_weights(), ref):
            np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-5, err_msg=name)

    steps, check = step_cases(keras, strategy, weights, x, y)
    for step in steps.values():
        _common.timed_sync(step, 3)
    iters = 10 if args.quick else 60
    res = _common.side_by_side({name: (lambda s=s: _common.timed_sync(s, iters)) for name, s in steps.items()},
                               rounds)
    rows.append(_common.row(ROWS[3], res["ours"], res["hand"], "s/step", note="goal <= 1.03"))
    check()

    spe, check, bare = spe_cases(keras, strategy)
    for fn in spe.values():
        fn()
    res = _common.side_by_side({k: (lambda fn=fn: timed(fn) / TINY_STEPS * 1e6) for k, fn in spe.items()}, rounds)
    rows.append(_common.row(ROWS[4], res[8], res[1], "µs/step", note="goal <= 0.5 (speed-up = 1/ratio >= 2)"))
    spe_rows = [_common.row(ROWS[6], res[8], res["fed"], "µs/step", note="goal <= 1.05 (within 5 %)")]
    check()
    programs = bare()
    for fn in programs.values():
        _common.timed_sync(fn, 2)
    calls = {8: TINY_STEPS // 8, 1: TINY_STEPS}
    res = _common.side_by_side({k: (lambda k=k, fn=fn: _common.timed_sync(fn, calls[k]) * calls[k] / TINY_STEPS * 1e6)
                                for k, fn in programs.items()}, rounds)
    rows.append(_common.row(ROWS[5], res[8], res[1], "µs/step", note="the ceiling for the row above"))
    _common.finish(rows + spe_rows, args.json)


if __name__ == "__main__":
    main()
