"""TensorFlow's ``tf.strings`` ops as NumPy functions (``tps.strings``), for dataset map functions.

A string scalar is Python ``bytes``; a string tensor is a NumPy object array of
``bytes`` (``str`` is accepted and encoded as UTF-8). A result TensorFlow makes
ragged is a `RaggedRows`. No JAX, no dataset machinery: the functions work on
NumPy values anywhere.
"""
