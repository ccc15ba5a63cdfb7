"""``tps.IndexedSlices``: rows of a dense tensor, given by their indices (``tf.IndexedSlices``).

A sparse update of a variable's first dimension: ``values[i]`` belongs to row
``indices[i]`` of a tensor of shape ``dense_shape``. ``Variable.scatter_*`` take
one, as TensorFlow's do. It is a JAX pytree (``values`` and ``indices`` are its
children), so it passes through ``strategy.run`` and ``tps.function``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


@jax.tree_util.register_pytree_node_class
class IndexedSlices:
    """A sparse representation of a set of rows of a tensor.

    Args:
      values: the rows, of shape ``indices.shape + dense_shape[1:]``.
      indices: integer indices into the first dimension of the dense tensor.
      dense_shape: the dense tensor's shape, or None when unknown.

    Example:
      ```python
      v = tps.Variable([1.0, 2.0, 3.0])
      v.scatter_add(tps.IndexedSlices(values=[10.0], indices=[1]))   # [1, 12, 3]
      ```
    """

    def __init__(self, values: Any, indices: Any, dense_shape: Any = None):
        self._values = values
        self._indices = indices
        self._dense_shape = None if dense_shape is None else tuple(int(d) for d in np.asarray(dense_shape).reshape(-1))

    @property
    def values(self) -> Any:
        """The rows."""
        return self._values

    @property
    def indices(self) -> Any:
        """The row indices."""
        return self._indices

    @property
    def dense_shape(self) -> tuple[int, ...] | None:
        """The dense tensor's shape (None when not given)."""
        return self._dense_shape

    @property
    def dtype(self) -> Any:
        return jnp.asarray(self._values).dtype

    @property
    def shape(self) -> tuple[int, ...] | None:
        """The dense shape (TensorFlow's ``IndexedSlices.shape``)."""
        return self._dense_shape

    def __neg__(self) -> IndexedSlices:
        return IndexedSlices(-jnp.asarray(self._values), self._indices, self._dense_shape)

    def __repr__(self) -> str:
        return (f"tps.IndexedSlices(indices={self._indices!r}, values={self._values!r}"
                + (f", dense_shape={self._dense_shape})" if self._dense_shape is not None else ")"))

    def tree_flatten(self) -> tuple[tuple[Any, Any], tuple[int, ...] | None]:
        return (self._values, self._indices), self._dense_shape

    @classmethod
    def tree_unflatten(cls, dense_shape: tuple[int, ...] | None, children: Any) -> IndexedSlices:
        out = cls.__new__(cls)
        out._values, out._indices = children
        out._dense_shape = dense_shape
        return out
