"""tf-keras's rules for a dataset given without a step count, under a strategy.

tf-keras (``keras/engine/data_adapter.py``, ``DatasetAdapter._validate_args``; the same code
in TensorFlow's ``tensorflow/python/keras/engine/data_adapter.py``) checks, when ``steps``
(``steps_per_epoch`` for ``fit``, ``validation_steps`` for its validation data, ``steps`` for
``evaluate`` / ``predict``) is None:

- a distributed dataset raises ``ValueError("When providing a distributed dataset, you must
  specify the number of steps to run.")``;
- an infinite dataset raises ``ValueError("When providing an infinite dataset, you must specify
  the number of steps to run (if you did not intend to create an infinite dataset, make sure to
  not call `repeat()` on the dataset).")``.

Both are raised before any step runs (Keras 3 instead trains forever on an infinite dataset).
"""

import re

import keras
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

X = np.random.default_rng(2).normal(size=(32, 4)).astype("float32")
Y = (X[:, 0] > 0).astype("int32")

DISTRIBUTED = "When providing a distributed dataset, you must specify the number of steps to run."
INFINITE = ("When providing an infinite dataset, you must specify the number of steps to run (if you did not "
            "intend to create an infinite dataset, make sure to not call `repeat()` on the dataset).")


@pytest.fixture
def setup():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        keras.utils.set_random_seed(1)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return strategy, model


def _steps(model):
    return int(model.optimizer.iterations.numpy())


def test_fit_on_an_infinite_dataset_without_steps_per_epoch_raises_at_once(setup):
    _, model = setup
    ds = tpsd.Dataset.from_tensor_slices((X, Y)).batch(8).repeat()
    with pytest.raises(ValueError, match=re.escape(INFINITE)) as raised:
        model.fit(ds, epochs=1, verbose=0)
    assert "Fix: pass the number of batches to run (fit: steps_per_epoch" in str(raised.value)
    assert _steps(model) == 0
    for call in (lambda: model.evaluate(ds, verbose=0), lambda: model.predict(ds.map(lambda x, y: x), verbose=0),
                 lambda: model.fit(tpsd.Dataset.from_tensor_slices((X, Y)).batch(8), validation_data=ds,
                                   verbose=0)):
        with pytest.raises(ValueError, match=re.escape(INFINITE)):
            call()
    model.fit(ds, epochs=2, steps_per_epoch=3, verbose=0)      # with the count it runs that many steps
    assert _steps(model) == 6 + 4   # the validation fit above trained one epoch (4 batches) first


def test_fit_on_an_infinite_distributed_dataset_without_steps_raises_tf_keras_error(setup):
    strategy, model = setup
    dist = strategy.experimental_distribute_dataset(tpsd.Dataset.from_tensor_slices((X, Y)).batch(8).repeat())
    with pytest.raises(ValueError, match=re.escape(DISTRIBUTED)):
        model.fit(dist, epochs=1, verbose=0)
    assert _steps(model) == 0
    model.fit(dist, epochs=2, steps_per_epoch=3, verbose=0)
    assert _steps(model) == 6


def test_a_finite_distributed_dataset_also_needs_a_step_count(setup):
    strategy, model = setup
    dist = strategy.experimental_distribute_dataset(tpsd.Dataset.from_tensor_slices((X, Y)).batch(8))
    with pytest.raises(ValueError, match=re.escape(DISTRIBUTED)) as raised:
        model.fit(dist, epochs=2, verbose=0)
    assert "or pass the tpsd.Dataset itself" in str(raised.value)
    with pytest.raises(ValueError, match=re.escape(DISTRIBUTED)):
        model.evaluate(dist, verbose=0)
    assert _steps(model) == 0
    model.fit(dist, epochs=2, steps_per_epoch=4, verbose=0)
    assert _steps(model) == 8
    assert np.isfinite(model.evaluate(dist, steps=4, verbose=0))


def test_a_finite_tpsd_dataset_needs_no_step_count(setup):
    _, model = setup
    model.fit(tpsd.Dataset.from_tensor_slices((X, Y)).batch(8), epochs=2, verbose=0)
    assert _steps(model) == 8
