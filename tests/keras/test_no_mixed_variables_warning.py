"""Keras under strategy.scope() warns about nothing plain Keras does not, on one device or many."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest

import tpustrategy as tps


@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_fit_evaluate_and_predict_give_no_mixed_variables_warning(steps_per_execution):
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"], steps_per_execution=steps_per_execution)
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        history = model.fit(x, y, batch_size=16, epochs=2, verbose=0)
        model.evaluate(x, y, batch_size=16, verbose=0)
        model.predict(x, batch_size=16, verbose=0)
    mixed = [str(w.message) for w in seen if "mix of local" in str(w.message)]
    assert mixed == []
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
