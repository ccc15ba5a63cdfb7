"""The Keras example (TensorFlow's TPU guide, Keras section) runs and learns."""

import importlib.util
import pathlib

import keras


def test_the_keras_fit_example_trains_over_the_tfrecord_pipeline():
    path = pathlib.Path(__file__).parents[2] / "examples" / "keras_fit.py"
    spec = importlib.util.spec_from_file_location("keras_fit", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    keras.utils.set_random_seed(0)
    history = example.main(epochs=3)
    assert history["loss"][-1] < history["loss"][0]
    assert history["val_sparse_categorical_accuracy"][-1] > 0.6
