"""The lazy tf.data-style dataset graph (NumPy only; never imports JAX)."""
