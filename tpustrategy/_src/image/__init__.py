"""``tf.image`` as NumPy functions (``tps.image``): for ``tpsd`` pipelines and plain arrays.

Imports neither JAX nor the dataset machinery, so a ``Dataset.map`` function can call it on the
NumPy elements it receives.
"""
