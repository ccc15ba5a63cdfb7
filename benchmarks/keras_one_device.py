"""Keras ``fit`` on one device: under ``strategy.scope()`` vs plain Keras ``fit``.

A user with one GPU, one TPU chip or a laptop compares a model built under
``tps.OneDeviceStrategy(device).scope()`` with the same model built without any
strategy (Keras 3 on JAX, no distribution). Same model (an MLP 64 -> 256 -> 256 -> 10,
sparse softmax cross-entropy from logits, SGD 0.01), same starting weights, same NumPy
arrays through Keras's own array adapter (``batch_size=256, shuffle=False``), one epoch
of 32 steps per measurement, interleaved round by round. The row is steps/s (higher is
better), goal >= 1.0 (issue 37). A second row feeds ``fit`` from a ``tpsd`` pipeline
(``from_tensor_slices(...).batch(256)``) under the strategy against the same plain fit
on arrays.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

_common.setup_devices(1)
os.environ["KERAS_BACKEND"] = "jax"

import jax  # noqa: E402
import numpy as np  # noqa: E402

import tpustrategy as tps  # noqa: E402
import tpustrategy.data as tpsd  # noqa: E402

SIZES = (64, 256, 256, 10)
BATCH = 256
STEPS = 32
LR = 0.01
GOAL = 1.0


def create_model(keras):
    layers = [keras.Input((SIZES[0],))]
    layers += [keras.layers.Dense(n, activation="relu") for n in SIZES[1:-1]]
    return keras.Sequential([*layers, keras.layers.Dense(SIZES[-1])])


def compiled(keras, weights):
    model = create_model(keras)
    model.set_weights(weights)
    model.compile(optimizer=keras.optimizers.SGD(LR),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def timed_fit(model, *args, **kwargs) -> float:
    """Steps/s of one epoch of ``fit``; the weights are waited on before the clock stops."""
    start = time.perf_counter()
    model.fit(*args, epochs=1, verbose=0, **kwargs)
    jax.block_until_ready([v.value for v in model.trainable_variables])
    return STEPS / (time.perf_counter() - start)


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=9, help="interleaved rounds (default 9)")
    args = p.parse_args()
    import keras

    rng = np.random.default_rng(0)
    x = rng.normal(size=(STEPS * BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], size=STEPS * BATCH).astype(np.int32)
    weights = create_model(keras).get_weights()
    plain = compiled(keras, weights)
    strategy = tps.OneDeviceStrategy(jax.devices()[0])
    with strategy.scope():
        ours = compiled(keras, weights)
        ours_pipeline = compiled(keras, weights)
    ds = tpsd.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    cases = {
        "plain": lambda: timed_fit(plain, x, y, batch_size=BATCH, shuffle=False),
        "ours": lambda: timed_fit(ours, x, y, batch_size=BATCH, shuffle=False),
        "ours_pipeline": lambda: timed_fit(ours_pipeline, ds),
    }
    for f in cases.values():  # compile every side before the clock starts
        f()
    rounds = 2 if args.quick else args.rounds
    got = _common.side_by_side(cases, rounds)
    device = jax.devices()[0].platform
    rows = [
        _common.row(f"one {device} device: Keras fit(arrays) under OneDeviceStrategy.scope() vs plain Keras fit",
                    got["ours"], got["plain"], "steps/s", higher_is_better=True, note=f"goal >= {GOAL}"),
        _common.row(f"one {device} device: Keras fit(tpsd pipeline) under the strategy vs plain Keras fit(arrays)",
                    got["ours_pipeline"], got["plain"], "steps/s", higher_is_better=True, note=f"goal >= {GOAL}"),
    ]
    _common.finish(rows, args.json)


if __name__ == "__main__":
    main()
