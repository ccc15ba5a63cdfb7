"""Keras tests: the JAX backend, chosen before Keras is imported."""

import os

os.environ["KERAS_BACKEND"] = "jax"
