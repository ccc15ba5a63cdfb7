"""TensorFlow's ``tf.sparse`` ops on NumPy COO values (``tps.sparse``), for dataset map functions.

A `SparseTensor` has TensorFlow's three fields: ``indices`` ``[nnz, rank]``
int64, ``values`` ``[nnz]`` and ``dense_shape`` ``[rank]`` int64. Every op also
takes any object with those three attributes (``tpsd.SparseBatch``, a
``VarLenFeature``'s parse result). No JAX, no dataset machinery.
"""
