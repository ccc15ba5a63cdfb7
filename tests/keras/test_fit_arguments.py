"""``fit`` arguments Keras accepts with a dataset, over tpsd datasets under a strategy, equal one device.

``class_weight``, sample weights inside the dataset, ``initial_epoch``, ``validation_freq``, ``shuffle=True``
with NumPy arrays and callbacks' ``save_freq`` in steps;
the reference is single-device Keras 3 on the same NumPy arrays in the same batches.
"""

import keras
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

X = np.random.default_rng(5).normal(size=(48, 5)).astype("float32")
Y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype("int32")
W = np.linspace(0.5, 2.0, 48).astype("float32")


def compiled(strategy=None):
    def make():
        keras.utils.set_random_seed(11)
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
        model.compile(optimizer=keras.optimizers.SGD(0.1),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()])
        return model

    if strategy is None:
        return make()
    with strategy.scope():
        return make()


def assert_history(got, want):
    assert set(got) == set(want)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6, err_msg=key)


@pytest.mark.parametrize("make", [tps.MirroredStrategy, tps.TPUStrategy], ids=["mirrored", "tpu"])
def test_class_weight_with_a_tpsd_dataset_equals_one_device(make):
    weights = {0: 1.0, 1: 3.0}
    want = compiled().fit(X, Y, batch_size=16, epochs=2, shuffle=False, class_weight=weights, verbose=0).history
    model = compiled(make())
    got = model.fit(tpsd.Dataset.from_tensor_slices((X, Y)).batch(16), epochs=2, class_weight=weights,
                    verbose=0).history
    assert_history(got, want)


def test_sample_weights_inside_the_dataset_equal_keras_sample_weight():
    want = compiled().fit(X, Y, sample_weight=W, batch_size=16, epochs=2, shuffle=False, verbose=0).history
    model = compiled(tps.MirroredStrategy())
    got = model.fit(tpsd.Dataset.from_tensor_slices((X, Y, W)).batch(16), epochs=2, verbose=0).history
    assert_history(got, want)


def test_class_weight_and_sample_weights_together_name_the_conflict():
    model = compiled(tps.MirroredStrategy())
    with pytest.raises(ValueError, match=r"`class_weight` needs a dataset of \(x, y\) batches"):
        model.fit(tpsd.Dataset.from_tensor_slices((X, Y, W)).batch(16), class_weight={0: 2.0}, verbose=0)


def test_class_weight_on_a_distributed_dataset_names_the_fix():
    strategy = tps.MirroredStrategy()
    model = compiled(strategy)
    dist = strategy.experimental_distribute_dataset(tpsd.Dataset.from_tensor_slices((X, Y)).batch(16))
    with pytest.raises(ValueError, match=r"cannot be applied to a distributed dataset.*\n.*tpsd dataset itself"):
        model.fit(dist, class_weight={0: 2.0}, verbose=0)


def test_initial_epoch_and_validation_freq_equal_one_device():
    val = (X[:24] * 0.5, Y[:24])
    want = compiled().fit(X, Y, batch_size=16, epochs=4, initial_epoch=1, shuffle=False, validation_data=val,
                          validation_batch_size=8, validation_freq=2, verbose=0).history
    model = compiled(tps.MirroredStrategy())
    got = model.fit(tpsd.Dataset.from_tensor_slices((X, Y)).batch(16), epochs=4, initial_epoch=1,
                    validation_data=tpsd.Dataset.from_tensor_slices(val).batch(8), validation_freq=2,
                    verbose=0).history
    assert len(got["loss"]) == 3 and len(got["val_loss"]) == 2   # after epochs 2 and 4 (1-based)
    assert_history(got, want)


@pytest.mark.parametrize("batch_size", [16, 20], ids=["even", "partial-last-batch"])
def test_shuffle_true_with_numpy_arrays_equals_one_device(batch_size):
    # Keras shuffles the arrays' order each epoch from its seed: the same seed, the same batches.
    want = compiled().fit(X, Y, batch_size=batch_size, epochs=3, shuffle=True, verbose=0).history
    unshuffled = compiled().fit(X, Y, batch_size=batch_size, epochs=3, shuffle=False, verbose=0).history
    assert not np.allclose(want["loss"], unshuffled["loss"])     # the shuffle changes the result
    model = compiled(tps.MirroredStrategy())
    got = model.fit(X, Y, batch_size=batch_size, epochs=3, shuffle=True, verbose=0).history
    assert_history(got, want)


def _weights_in(path):
    model = compiled()
    model.load_weights(path)
    return model.get_weights()


def test_model_checkpoint_save_freq_in_steps_equals_one_device(tmp_path):
    def run(model, folder, x):
        pattern = str(tmp_path / folder / "ckpt-{epoch}-{batch}.weights.h5")
        callback = keras.callbacks.ModelCheckpoint(pattern, save_weights_only=True, save_freq=2)
        model.fit(x, epochs=2, callbacks=[callback], verbose=0) if folder != "one" else \
            model.fit(X, Y, batch_size=8, epochs=2, shuffle=False, callbacks=[callback], verbose=0)
        return sorted(p.name for p in (tmp_path / folder).iterdir())

    want = run(compiled(), "one", None)
    # 6 steps per epoch, a save every 2 steps (Keras's 1-based batch number in the name)
    assert want == sorted(f"ckpt-{e}-{b}.weights.h5" for e in (1, 2) for b in (2, 4, 6))
    got = run(compiled(tps.MirroredStrategy()), "strategy", tpsd.Dataset.from_tensor_slices((X, Y)).batch(8))
    assert got == want
    for name in want:
        for g, w in zip(_weights_in(tmp_path / "strategy" / name), _weights_in(tmp_path / "one" / name)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=name)


class _Interrupt(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        self.seen = getattr(self, "seen", 0) + 1
        if self.seen == 9:                      # in the second epoch, after the backup at step 8
            raise RuntimeError("Interrupting!")


@pytest.mark.parametrize("save_freq", ["epoch", 4])
def test_backup_and_restore_save_freq_resumes_as_one_device(tmp_path, save_freq):
    def run(strategy, folder, x):
        backup = keras.callbacks.BackupAndRestore(str(tmp_path / folder), save_freq=save_freq)
        kwargs = {"x": x, "epochs": 3, "verbose": 0} if strategy else {
            "x": X, "y": Y, "batch_size": 8, "epochs": 3, "shuffle": False, "verbose": 0}
        with pytest.raises(RuntimeError, match="Interrupting!"):
            compiled(strategy).fit(callbacks=[backup, _Interrupt()], **kwargs)
        model = compiled(strategy)
        return model.fit(callbacks=[backup], **kwargs).history, model.get_weights()

    want, want_weights = run(None, "one", None)
    assert len(want["loss"]) == 2                  # resumed at the second epoch (Keras restores the epoch)
    got, got_weights = run(tps.MirroredStrategy(), "strategy", tpsd.Dataset.from_tensor_slices((X, Y)).batch(8))
    assert_history(got, want)
    for g, w in zip(got_weights, want_weights):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_tpsd_dataset_reaches_keras_fit_before_any_scope():
    """In a fresh process: Keras's own fit (no strategy.scope() ever entered) over a tpsd dataset.

    Creating a dataset while Keras is imported installs the support (``context.extensions``'
    dataset table); a dataset made before Keras was imported gets it at the next dataset.
    """
    import json
    import subprocess
    import sys

    code = (
        "import os, json; os.environ['KERAS_BACKEND'] = 'jax'\n"
        "import numpy as np, tpustrategy.data as tpsd\n"
        "from tpustrategy._src.keras import patches\n"
        "x = np.arange(24, dtype='float32').reshape(12, 2) / 10; y = (x[:, 0] > 1).astype('int32')\n"
        "tpsd.Dataset.range(3)\n"
        "without_keras = patches.installed()\n"
        "import keras\n"
        "def model():\n"
        "    keras.utils.set_random_seed(1)\n"
        "    m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])\n"
        "    m.compile(optimizer=keras.optimizers.SGD(0.1), loss=keras.losses.SparseCategoricalCrossentropy("
        "from_logits=True))\n"
        "    return m\n"
        "ds = tpsd.Dataset.from_tensor_slices((x, y)).batch(4)\n"
        "got = model().fit(ds, epochs=2, verbose=0).history['loss']\n"
        "want = model().fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0).history['loss']\n"
        "print(json.dumps([without_keras, patches.installed(), got, want]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    without_keras, installed, got, want = json.loads(out.stdout.strip().splitlines()[-1])
    assert not without_keras  # nothing is installed while Keras is not imported
    assert installed
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
