"""TensorFlow's own checkpoint files (``tf.train.Checkpoint``'s tensor bundle), without TensorFlow."""
