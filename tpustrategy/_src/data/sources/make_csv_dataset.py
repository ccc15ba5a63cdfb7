"""`make_csv_dataset`: batches of CSV rows as dicts of columns (``tf.data.experimental.make_csv_dataset``).

TensorFlow's pipeline, built from our nodes: the matching files (shuffled
when ``shuffle``), one `CsvDataset` per file interleaved ``num_parallel_reads``
at a time, a shuffle buffer, ``repeat(num_epochs)``, ``batch`` (dropping the
last partial batch when the stream repeats forever), a map to an ordered
dict ``{column name: batch}`` (with ``label_name`` split off as the label)
and a prefetch. Column names come from the first file's header when not
given; column types are inferred from the first ``num_rows_for_inference``
rows (int32, int64, float32, float64, then string; an empty field then
takes 0, 0.0 or "") when ``column_defaults`` is None. Every stage checkpoints, and FILE auto-sharding shards the file list.
"""

from __future__ import annotations

import collections
import glob
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.options import AUTOTUNE
from tpustrategy._src.data.core.structure import OBJECT
from tpustrategy._src.data.sources.csv_dataset import CsvDataset, _records, split_quoted
from tpustrategy._src.data.sources.from_tensors import TensorSliceDataset

_API = "make_csv_dataset"


def file_names(file_pattern: Any, shuffle: bool, api: str) -> list[bytes]:
    """The files matching ``file_pattern`` (a glob or a list of them), sorted unless shuffled later."""
    patterns = [file_pattern] if isinstance(file_pattern, (str, bytes, os.PathLike)) else list(file_pattern)
    names: list[str] = []
    for p in patterns:
        p = os.fsdecode(p)
        found = glob.glob(p)
        names.extend(sorted(found) if found else ([p] if os.path.exists(p) else []))
    if not names:
        raise ValueError(
            f"{api}: no files match `file_pattern` {file_pattern!r}.\n"
            "Fix: check the directory and the wildcard (a shell glob, e.g. '/data/train-*.csv')."
        )
    return [os.fsencode(n) for n in (names if shuffle else sorted(names))]


def _first_rows(path: str, n: int, delim: str, use_quote: bool, compression: str | None) -> list[list[bytes]]:
    from tpustrategy._src.data.sources import _compression

    ctype = _compression.validate_compression_type(compression, api=_API)
    out: list[list[bytes]] = []
    gen = _records(path, ctype, 0, 1 << 20, use_quote, delim.encode()[0])
    try:
        for _, recs, _lens in gen:
            for rec in recs:
                out.append(split_quoted(rec, delim.encode(), use_quote))
                if len(out) >= n:
                    return out
    finally:
        gen.close()
    return out


def _infer_type(value: bytes, na_value: str, prev: np.dtype) -> np.dtype:
    order = [np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32), np.dtype(np.float64), OBJECT]
    if value in (b"", na_value.encode()):
        return prev
    for t in order[order.index(prev):]:
        try:
            if t.kind == "i":
                v = int(value)
                if t == np.int32 and not -(2**31) <= v < 2**31:
                    continue
                return t
            if t.kind == "f":
                float(value)
                return t
        except ValueError:
            continue
    return OBJECT


def make_csv_dataset(
    file_pattern: Any, batch_size: int, column_names: Sequence[str] | None = None,
    column_defaults: Sequence[Any] | None = None, label_name: str | None = None,
    select_columns: Sequence[Any] | None = None, field_delim: str = ",", use_quote_delim: bool = True,
    na_value: str = "", header: bool = True, num_epochs: int | None = None, shuffle: bool = True,
    shuffle_buffer_size: int = 10000, shuffle_seed: int | None = None, prefetch_buffer_size: int | None = None,
    num_parallel_reads: int | None = None, sloppy: bool = False, num_rows_for_inference: int = 100,
    compression_type: str | None = None, ignore_errors: bool = False, encoding: str = "utf-8",
) -> Dataset:
    """Batches of CSV rows: ``{name: column batch}`` or ``(features, label)``; see the module docstring.

    Example:
      >>> ds = make_csv_dataset("train-*.csv", batch_size=32, label_name="y", num_epochs=1)
    """
    names = file_names(file_pattern, shuffle, _API)
    first = os.fsdecode(names[0])
    rows = None
    if column_names is None:
        if not header:
            raise ValueError(f"{_API}: column_names must be given when header=False.\nFix: pass column_names=[...].")
        rows = _first_rows(first, num_rows_for_inference + 1, field_delim, use_quote_delim, compression_type)
        if not rows:
            raise ValueError(f"{_API}: cannot read the header of {first}: the file is empty.")
        column_names = [c.decode(encoding) for c in rows[0]]
    column_names = list(column_names)
    if len(set(column_names)) != len(column_names):
        raise ValueError(f"{_API}: column names must be unique; received {column_names}.")
    if select_columns is not None:
        idx = sorted({column_names.index(c) if isinstance(c, str) else int(c) for c in select_columns
                      if not isinstance(c, str) or c in column_names})
        if len(idx) != len(select_columns):
            raise ValueError(f"{_API}: select_columns {list(select_columns)} name columns that are not in "
                             f"{column_names}.")
        column_names = [column_names[i] for i in idx]
    else:
        idx = None
    if label_name is not None and label_name not in column_names:
        raise ValueError(f"{_API}: `label_name` {label_name!r} must be one of the columns {column_names}.")
    if column_defaults is None:
        if rows is None:
            rows = _first_rows(first, num_rows_for_inference + header, field_delim, use_quote_delim, compression_type)
        body = rows[1:] if header else rows
        cols = idx if idx is not None else list(range(len(column_names)))
        types = [np.dtype(np.int32)] * len(cols)
        for r in body[:num_rows_for_inference]:
            for k, c in enumerate(cols):
                if c < len(r):
                    types[k] = _infer_type(r[c].strip(), na_value, types[k])
        # TensorFlow gives inferred columns a default (0, 0.0 or ""), so empty fields are allowed.
        column_defaults = [t.type(0) if t != OBJECT else b"" for t in types]
    elif len(column_defaults) != len(column_names):
        raise ValueError(f"{_API}: column_defaults has {len(column_defaults)} entries for "
                         f"{len(column_names)} columns.\nFix: give one default per (selected) column.")

    def one_file(name: Any) -> Dataset:
        ds = CsvDataset(name, record_defaults=list(column_defaults), field_delim=field_delim,
                        use_quote_delim=use_quote_delim, na_value=na_value, select_cols=idx, header=header,
                        compression_type=compression_type)
        return ds.ignore_errors() if ignore_errors else ds

    files: Dataset = TensorSliceDataset(np.array(names, dtype=OBJECT))
    if shuffle:
        files = files.shuffle(len(names), seed=shuffle_seed)
    reads = 1 if num_parallel_reads is None else num_parallel_reads
    ds = files.interleave(one_file, cycle_length=reads, block_length=1,
                          num_parallel_calls=None if reads == 1 else reads, deterministic=not sloppy)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer_size, seed=shuffle_seed)
    if num_epochs != 1:
        ds = ds.repeat(num_epochs)
    ds = ds.batch(batch_size, drop_remainder=num_epochs is None)
    keys = list(column_names)

    def to_dict(*columns: Any) -> Any:
        features = collections.OrderedDict(zip(keys, columns))
        if label_name is None:
            return features
        label = features.pop(label_name)
        return features, label

    ds = ds.map(to_dict)
    return ds.prefetch(AUTOTUNE if prefetch_buffer_size is None else prefetch_buffer_size)
