"""``tps.GradientTape``: TensorFlow's gradient tape over JAX's traced programs."""
