"""``tf.sparse.cross`` / ``cross_hashed``: feature crosses of sparse and dense string / integer features, row by row.

Each row's crosses are the Cartesian product of the row's values of every input,
joined with ``separator`` (``"_X_"``): the sparse inputs first, then the dense
ones (each group in the order given, as TensorFlow orders them), the first input
varying slowest. Integers are written in decimal. A row where an input has no
value has no crosses.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.sparse.tensor import OBJECT, SparseTensor, as_sparse

_API = "tps.sparse.cross"


def _text(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value)).encode()
    raise InvalidArgumentError(f"{_API}: feature values must be strings or integers; received "
                               f"{type(value).__name__}: {value!r}.\nFix: cast float features to ints or strings.")


def _rows(value: Any, position: int) -> list[list[bytes]]:
    if all(hasattr(value, f) for f in ("indices", "values", "dense_shape")):
        st = as_sparse(value, _API, "inputs")
        if st.dense_shape.size != 2:
            raise InvalidArgumentError(f"Sparse inputs should be a matrix but received shape "
                                       f"{st.dense_shape.tolist()} at position {position}\n"
                                       f"({_API}: Fix: give every feature the shape [batch, values].)")
        rows: list[list[bytes]] = [[] for _ in range(int(st.dense_shape[0]))]
        for r, v in zip(st.indices[:, 0].tolist(), st.values.tolist()):
            rows[r].append(_text(v))
        return rows
    arr = np.asarray(value, dtype=OBJECT if isinstance(value, (list, tuple)) else None)
    if arr.ndim != 2:
        raise InvalidArgumentError(f"Dense inputs should be a matrix but received shape {list(arr.shape)} at position "
                                   f"{position}\n({_API}: Fix: give every feature the shape [batch, values].)")
    return [[_text(v) for v in row] for row in arr.tolist()]


def cross(inputs: Any, name: str | None = None, separator: Any = None) -> SparseTensor:
    """The feature crosses of ``inputs``, per row (``tf.sparse.cross``).

    Args:
      inputs: a list of `SparseTensor` and dense ``[batch, n]`` string or integer features.
      name: ignored.
      separator: put between crossed values (None: ``"_X_"``).

    Returns:
      A string `SparseTensor` ``[batch, most crosses in a row]``.

    Raises:
      InvalidArgumentError: an input is not 2-D, or the inputs have different batch sizes.

    Example:
      >>> cross([SparseTensor([[0, 0], [1, 0]], [b"a", b"b"], [2, 1]), np.array([[b"x"], [b"y"]], dtype=object)])
      SparseTensor(indices=[[0, 0], [1, 0]], values=[b'a_X_x', b'b_X_y'], dense_shape=[2, 1])
    """
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise TypeError(f"{_API}: `inputs` must be a non-empty list of features; received {type(inputs).__name__}.\n"
                        "Fix: e.g. cross([sparse_feature, dense_feature]).")
    sep = b"_X_" if separator is None else (separator.encode("utf-8") if isinstance(separator, str) else separator)
    is_sparse = [all(hasattr(x, f) for f in ("indices", "values", "dense_shape")) for x in inputs]
    # Positions in messages count within each group, as TensorFlow's op takes the two groups apart.
    sparse = [x for x, flag in zip(inputs, is_sparse) if flag]
    dense = [x for x, flag in zip(inputs, is_sparse) if not flag]
    features = [_rows(x, pos) for pos, x in enumerate(sparse)] + [_rows(x, pos) for pos, x in enumerate(dense)]
    batch = len(features[0])
    if any(len(f) != batch for f in features):
        raise InvalidArgumentError(f"{_API}: the inputs have batch sizes {[len(f) for f in features]}; they must "
                                   "agree.\nFix: cross features of the same batch.")
    per_row = [[sep.join(combo) for combo in itertools.product(*(f[r] for f in features))] for r in range(batch)]
    longest = max((len(row) for row in per_row), default=0)
    indices = np.array([[r, j] for r, row in enumerate(per_row) for j in range(len(row))], dtype=np.int64)
    values = np.empty(len(indices), dtype=OBJECT)
    values[:] = [v for row in per_row for v in row]
    return SparseTensor(indices.reshape(-1, 2), values, np.array([batch, longest], dtype=np.int64))


_MASK = (1 << 64) - 1
_K_MUL = 0xC6A4A7935BD1E995
_DEFAULT_HASH_KEY = 0xDECAFCAFFE


def _shift_mix(value: int) -> int:
    return value ^ (value >> 47)


def _fingerprint_cat64(fp1: int, fp2: int) -> int:
    """TensorFlow's ``FingerprintCat64``: two 64-bit fingerprints combined into one."""
    result = fp1 ^ _K_MUL
    result ^= (_shift_mix((fp2 * _K_MUL) & _MASK) * _K_MUL) & _MASK
    result = (result * _K_MUL) & _MASK
    result = (_shift_mix(result) * _K_MUL) & _MASK
    return _shift_mix(result)


def _feature_hashes(value: Any, position: int, fingerprint64: Any) -> list[list[int]]:
    rows = _rows(value, position)
    if all(hasattr(value, f) for f in ("indices", "values", "dense_shape")):
        raw = np.asarray(value.values)
    else:
        raw = np.asarray(value)
    if raw.dtype.kind in "iu":
        # Integer features enter as their own 64-bit value, strings through Fingerprint64.
        return [[int(t) & _MASK for t in row] for row in rows]
    return [[fingerprint64(t) for t in row] for row in rows]


def cross_hashed(inputs: Any, num_buckets: Any = 0, hash_key: Any = None, name: str | None = None) -> SparseTensor:
    """Hashed feature crosses of ``inputs`` (``tf.sparse.cross_hashed``).

    Each cross hashes as TensorFlow does: ``FingerprintCat64`` folded over the features'
    hashes (FarmHash ``Fingerprint64`` of a string, an integer's own value), starting from
    ``hash_key``; taken modulo ``num_buckets`` (0: modulo ``2**63 - 1``, as TensorFlow).

    Args:
      inputs: a list of `SparseTensor` and dense ``[batch, n]`` string or integer features.
      num_buckets: the number of buckets (0: ``2**63 - 1``).
      hash_key: the 64-bit key to start from (None: TensorFlow's default).
      name: ignored.

    Returns:
      An int64 `SparseTensor` ``[batch, most crosses in a row]``.
    """
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise TypeError("tps.sparse.cross_hashed: `inputs` must be a non-empty list of features; received "
                        f"{type(inputs).__name__}.\nFix: e.g. cross_hashed([sparse_feature, dense_feature], 1000).")
    try:
        import farmhash
    except ImportError:
        raise ImportError(
            "tps.sparse.cross_hashed hashes strings with FarmHash's Fingerprint64, from the `pyfarmhash` package.\n"
            "Fix: pip install 'tpustrategy[strings]' (or pip install pyfarmhash).") from None
    buckets = int(num_buckets)
    modulus = buckets if buckets > 0 else (1 << 63) - 1  # TensorFlow: 0 buckets means modulo int64's maximum
    key = _DEFAULT_HASH_KEY if hash_key is None else int(hash_key) & _MASK
    is_sparse = [all(hasattr(x, f) for f in ("indices", "values", "dense_shape")) for x in inputs]
    sparse = [x for x, flag in zip(inputs, is_sparse) if flag]
    dense = [x for x, flag in zip(inputs, is_sparse) if not flag]
    features = [_feature_hashes(x, pos, farmhash.fingerprint64) for pos, x in enumerate(sparse)] + [
        _feature_hashes(x, pos, farmhash.fingerprint64) for pos, x in enumerate(dense)]
    batch = len(features[0])
    if any(len(f) != batch for f in features):
        raise InvalidArgumentError(f"tps.sparse.cross_hashed: the inputs have batch sizes {[len(f) for f in features]}; "
                                   "they must agree.\nFix: cross features of the same batch.")
    per_row = []
    for r in range(batch):
        row = []
        for combo in itertools.product(*(f[r] for f in features)):
            h = key
            for part in combo:
                h = _fingerprint_cat64(h, part)
            row.append(h % modulus)
        per_row.append(row)
    longest = max((len(row) for row in per_row), default=0)
    indices = np.array([[r, j] for r, row in enumerate(per_row) for j in range(len(row))], dtype=np.int64)
    values = np.array([v for row in per_row for v in row], dtype=np.int64)
    return SparseTensor(indices.reshape(-1, 2), values, np.array([batch, longest], dtype=np.int64))
