"""TensorFlow's ``tf.sparse`` ops on NumPy COO values (``tps.sparse``), for ``tpsd`` map functions.

A ``SparseTensor`` holds ``indices`` ``[nnz, rank]`` int64, ``values`` ``[nnz]``
and ``dense_shape`` ``[rank]`` int64 (the fields of ``tpsd.SparseBatch``); every
op accepts any object with those three attributes.
"""

from tpustrategy._src.not_provided import NotProvided as _NotProvided
from tpustrategy._src.sparse.arith import add as add
from tpustrategy._src.sparse.arith import bincount as bincount
from tpustrategy._src.sparse.arith import eye as eye
from tpustrategy._src.sparse.arith import fill_empty_rows as fill_empty_rows
from tpustrategy._src.sparse.arith import map_values as map_values
from tpustrategy._src.sparse.arith import maximum as maximum
from tpustrategy._src.sparse.arith import minimum as minimum
from tpustrategy._src.sparse.arith import reduce_max as reduce_max
from tpustrategy._src.sparse.arith import reduce_sum as reduce_sum
from tpustrategy._src.sparse.arith import retain as retain
from tpustrategy._src.sparse.arith import segment_mean as segment_mean
from tpustrategy._src.sparse.arith import segment_sqrt_n as segment_sqrt_n
from tpustrategy._src.sparse.arith import segment_sum as segment_sum
from tpustrategy._src.sparse.arith import softmax as softmax
from tpustrategy._src.sparse.arith import sparse_dense_matmul as sparse_dense_matmul
from tpustrategy._src.sparse.convert import from_dense as from_dense
from tpustrategy._src.sparse.convert import to_dense as to_dense
from tpustrategy._src.sparse.convert import to_indicator as to_indicator
from tpustrategy._src.sparse.cross import cross as cross
from tpustrategy._src.sparse.cross import cross_hashed as cross_hashed
from tpustrategy._src.sparse.reshaping import concat as concat
from tpustrategy._src.sparse.reshaping import expand_dims as expand_dims
from tpustrategy._src.sparse.reshaping import reorder as reorder
from tpustrategy._src.sparse.reshaping import reset_shape as reset_shape
from tpustrategy._src.sparse.reshaping import reshape as reshape
from tpustrategy._src.sparse.reshaping import slice as slice  # noqa: A004 - TensorFlow's name
from tpustrategy._src.sparse.reshaping import split as split
from tpustrategy._src.sparse.reshaping import transpose as transpose
from tpustrategy._src.sparse.sampled import sampled_addmm as sampled_addmm
from tpustrategy._src.sparse.tensor import SparseTensor as SparseTensor

mask = _NotProvided(
    "tf.sparse.mask",
    "it masks a tf.IndexedSlices (gradient slices of a graph), which has no counterpart here.",
    "rows = np.isin(indices, mask_indices, invert=True); values[rows], indices[rows].")
