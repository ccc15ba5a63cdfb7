"""TensorFlow's ``tf.io`` input-pipeline ops as NumPy functions (``tps.io``).

Strings are Python ``bytes`` (a scalar string tensor) or object arrays of ``bytes``
(a string tensor), as ``tpustrategy.data`` elements hold them, so these functions take
what ``tpsd`` map functions receive. Nothing here imports JAX or the dataset machinery.
Image codecs need the ``images`` extra (``pip install tpustrategy[images]``).
"""
