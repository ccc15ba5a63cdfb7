"""`CsvDataset`: rows of CSV files as tuples of scalars (``tf.data.experimental.CsvDataset``).

A reader node (file names in, so FILE auto-sharding applies). Each file is
read in blocks of its uncompressed stream and split into records on
newlines, a record continuing over newlines inside a quoted field (RFC 4180,
as TensorFlow's reader does). Fields are converted per chunk of records,
column by column with NumPy; a record that does not parse raises
``InvalidArgumentError`` with TensorFlow's message after the good records
before it.

Column types come from ``record_defaults``: a one-element value is the
default of an empty (or ``na_value``) field and fixes the dtype (Python
``int`` -> int32, ``float`` -> float32, ``str`` -> string); an empty list,
an empty array or a bare dtype makes the field required (``[]``: float32).

A checkpoint is the reader's: the file, the start offset of the current
chunk of records and the number consumed from it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from tpustrategy._src.data.core.structure import OBJECT, TensorSpec, as_dtype
from tpustrategy._src.data.sources import _compression, record_io
from tpustrategy._src.data.sources.readers import _ReaderDataset
from tpustrategy._src.errors import InvalidArgumentError

_API = "CsvDataset"
_TYPES = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32), np.dtype(np.float64), OBJECT)
_RECORDS = record_io.CHUNK_RECORDS


def _column(default: Any, i: int) -> tuple[np.dtype, Any]:
    """``(dtype, default value or None if required)`` of ``record_defaults[i]``."""
    if isinstance(default, (type, np.dtype)) or (isinstance(default, str) and default in ("string", "str")):
        return as_dtype(default), None
    if isinstance(default, (list, tuple)):
        if len(default) > 1:
            raise ValueError(f"{_API}: record_defaults[{i}] must have at most one element; received {default!r}.")
        if not default:
            return np.dtype(np.float32), None
        default = default[0]
    if isinstance(default, np.ndarray):
        if default.size > 1:
            raise ValueError(f"{_API}: record_defaults[{i}] must have at most one element; received shape {default.shape}.")
        dtype = OBJECT if default.dtype.kind in "SUO" else default.dtype
        if default.size == 0:
            return dtype, None
        default = default.reshape(-1)[0]
        if dtype != OBJECT:
            return dtype, dtype.type(default)
    if isinstance(default, (str, bytes, np.str_, np.bytes_)):
        return OBJECT, default.encode() if isinstance(default, str) else bytes(default)
    if isinstance(default, (bool, np.bool_)):
        raise TypeError(f"{_API}: record_defaults[{i}] must be int, float or string; received a bool.")
    if isinstance(default, np.generic):
        return default.dtype, default
    if isinstance(default, int):
        return np.dtype(np.int32), np.int32(default)
    if isinstance(default, float):
        return np.dtype(np.float32), np.float32(default)
    raise TypeError(
        f"{_API}: record_defaults[{i}] must be a one-element list with the default value, an empty "
        f"list or a dtype; received {type(default).__name__}: {default!r}.\n"
        "Fix: e.g. record_defaults=[[0], [0.0], [''], np.float32]."
    )


def parse_columns(record_defaults: Sequence[Any]) -> tuple[list[np.dtype], list[Any]]:
    if not isinstance(record_defaults, (list, tuple)) or not record_defaults:
        raise ValueError(f"{_API}: record_defaults must be a non-empty list; received {record_defaults!r}.")
    cols = [_column(d, i) for i, d in enumerate(record_defaults)]
    for i, (dt, _) in enumerate(cols):
        if dt not in _TYPES:
            raise TypeError(f"{_API}: record_defaults[{i}] has dtype {dt}; supported: int32, int64, float32, float64, string.")
    return [c[0] for c in cols], [c[1] for c in cols]


def split_quoted(rec: bytes, delim: bytes, use_quote: bool) -> list[bytes]:
    """The fields of one record (quotes handled as TensorFlow's reader does)."""
    if not use_quote or b'"' not in rec:
        return rec.split(delim)
    fields, i, n = [], 0, len(rec)
    while True:
        if i < n and rec[i : i + 1] == b'"':
            out, i = bytearray(), i + 1
            while True:
                j = rec.find(b'"', i)
                if j < 0:
                    raise InvalidArgumentError(f"Quoted field has to end with quote followed by delim or end: {rec!r}")
                out += rec[i:j]
                if rec[j + 1 : j + 2] == b'"':
                    out += b'"'
                    i = j + 2
                    continue
                i = j + 1
                break
            if i < n and rec[i : i + len(delim)] != delim:
                raise InvalidArgumentError(f"Quote inside a string has to be escaped by another quote: {rec!r}")
            fields.append(bytes(out))
        else:
            j = rec.find(delim, i)
            field = rec[i:] if j < 0 else rec[i:j]
            if b'"' in field:
                raise InvalidArgumentError(f"Unquoted fields cannot have quotes inside: {rec!r}")
            fields.append(field)
            if j < 0:
                return fields
            i = j + len(delim)
            continue
        if i >= n:
            return fields
        i += len(delim)
        if i >= n:
            fields.append(b"")
            return fields


def _inside_quotes(rec: bytes, delim: int) -> bool:
    """Whether ``rec`` ends inside a quoted field (one that starts with ``"``)."""
    quoted, at_start, i, n = False, True, 0, len(rec)
    while i < n:
        c = rec[i]
        if quoted:
            if c == 34:
                if i + 1 < n and rec[i + 1] == 34:
                    i += 1
                else:
                    quoted = False
        elif c == delim:
            at_start = True
            i += 1
            continue
        elif c == 34 and at_start:
            quoted = True
        at_start = False
        i += 1
    return quoted


def _records(path: str, ctype: str, start: int, block: int, use_quote: bool,
             delim: int) -> Iterator[tuple[int, list[bytes], list[int]]]:
    """``(offset, records, byte lengths)`` chunks; a record may hold newlines inside quotes."""
    stream = _compression.open_stream(path, ctype, block_size=block)
    try:
        if _compression.seek_stream(stream, start, ctype) < start:
            raise ValueError(f"{_API}: offset {start} is past the end of {path}.")
        offset, tail, pending, pending_len = start, b"", b"", 0
        out: list[bytes] = []
        lens: list[int] = []
        out_offset = offset
        while True:
            data = stream.read(block)
            if not data:
                break
            lines = (tail + data).split(b"\n")
            tail = lines.pop()
            for line in lines:
                if pending_len:
                    pending += b"\n" + line
                    pending_len += len(line) + 1
                else:
                    pending, pending_len = line, len(line) + 1
                if use_quote and b'"' in pending and _inside_quotes(pending, delim):
                    continue  # a quoted field goes on past this newline
                out.append(pending.replace(b"\r", b"") if b"\r" in pending else pending)
                lens.append(pending_len)
                offset += pending_len
                pending, pending_len = b"", 0
                if len(out) >= _RECORDS:
                    yield out_offset, out, lens
                    out, lens, out_offset = [], [], offset
        last = (pending + b"\n" + tail) if pending_len else tail
        last = last.replace(b"\r", b"")
        if last:
            out.append(last)
            lens.append(len(last))
        if out:
            yield out_offset, out, lens
    finally:
        stream.close()


class CsvDataset(_ReaderDataset):
    """Rows of CSV files (``tf.data.experimental.CsvDataset``).

    Args:
      filenames: a file name, a list of them, or a Dataset of ``bytes`` names.
      record_defaults: one entry per output column (see the module docstring).
      compression_type: None or "" (none), "GZIP" or "ZLIB".
      buffer_size: read block size in bytes (None: 512 KiB).
      header: skip the first record of every file.
      field_delim: the one-character field separator.
      use_quote_delim: treat ``"`` as the quote character (False: an ordinary character).
      na_value: a field equal to it counts as empty.
      select_cols: the sorted indices of the columns to keep.
      exclude_cols: the sorted indices of the columns to drop (not with ``select_cols``).

    Example:
      >>> ds = CsvDataset(["a.csv"], record_defaults=[[0], [0.0], [""]], header=True)
    """

    _api = _API
    _params = ("record_defaults", "compression_type", "buffer_size", "header", "field_delim", "use_quote_delim",
               "na_value", "select_cols", "exclude_cols")

    def __init__(self, filenames: Any, record_defaults: Sequence[Any], compression_type: str | None = None,
                 buffer_size: int | None = None, header: bool = False, field_delim: str = ",",
                 use_quote_delim: bool = True, na_value: str = "", select_cols: Sequence[int] | None = None,
                 exclude_cols: Sequence[int] | None = None):
        super().__init__(filenames, compression_type, buffer_size, None)
        self.record_defaults = list(record_defaults) if isinstance(record_defaults, (list, tuple)) else record_defaults
        self._dtypes, self._defaults = parse_columns(self.record_defaults)
        if not isinstance(field_delim, (str, bytes)) or len(field_delim) != 1:
            raise ValueError(f"{_API}: field_delim must be one character; received {field_delim!r}.")
        self.header, self.field_delim, self.use_quote_delim = bool(header), field_delim, bool(use_quote_delim)
        self.na_value = na_value
        if select_cols and exclude_cols:
            raise InvalidArgumentError("Either select_cols or exclude_cols should be empty")
        for arg, cols in (("select_cols", select_cols), ("exclude_cols", exclude_cols)):
            if cols and (any(int(c) < 0 for c in cols) or list(cols) != sorted(set(int(c) for c in cols))):
                raise InvalidArgumentError(f"{_API}: {arg} must be non-negative and strictly increasing; received {list(cols)}.")
        self.select_cols = [int(c) for c in select_cols] if select_cols else None
        self.exclude_cols = [int(c) for c in exclude_cols] if exclude_cols else None
        if self.select_cols and len(self.select_cols) != len(self._dtypes):
            raise ValueError(
                f"{_API}: select_cols has {len(self.select_cols)} columns but record_defaults has "
                f"{len(self._dtypes)} entries.\nFix: give one record default per selected column."
            )

    def _compute_spec(self, input_spec: Any) -> Any:
        return tuple(TensorSpec((), d) for d in self._dtypes)

    def _open_chunks(self, path: str, start_offset: int) -> Iterator[tuple[int, list[Any]]]:
        block = record_io.DEFAULT_BUFFER_SIZE if not self.buffer_size else self.buffer_size
        delim = (self.field_delim.encode() if isinstance(self.field_delim, str) else self.field_delim)[0]
        gen = _records(path, self.compression_type, start_offset, block, self.use_quote_delim, delim)
        return _CsvChunks(self, path, gen, skip_header=self.header and start_offset == 0)

    def _fields(self, rec: bytes) -> list[bytes]:
        delim = self.field_delim.encode() if isinstance(self.field_delim, str) else self.field_delim
        fields = split_quoted(rec, delim, self.use_quote_delim)
        n = len(self._dtypes)
        if self.select_cols is not None:
            if len(fields) <= self.select_cols[-1]:
                have = sum(1 for c in self.select_cols if c < len(fields))
                raise InvalidArgumentError(f"Expect {n} fields but have {have} in record")
            return [fields[c] for c in self.select_cols]
        if self.exclude_cols is not None:
            drop = set(self.exclude_cols)
            fields = [f for i, f in enumerate(fields) if i not in drop]
        if len(fields) != n:
            more = "more" if len(fields) > n else str(len(fields))
            raise InvalidArgumentError(f"Expect {n} fields but have {more} in record")
        return fields

    def parse(self, recs: list[bytes]) -> tuple[list[Any], BaseException | None]:
        """The rows of the leading good records, and the error of the first bad one (or None)."""
        rows: list[list[bytes]] = []
        error: BaseException | None = None
        for rec in recs:
            try:
                rows.append(self._fields(rec))
            except InvalidArgumentError as e:
                error = e
                break
        cols, good = self._convert(rows)
        out = list(zip(*cols)) if cols and good else []
        if good < len(rows):
            error = self._row_error(rows[good])
        return out, error

    def _convert(self, rows: list[list[bytes]]) -> tuple[list[list[Any]], int]:
        """Columns of converted values, and how many leading rows converted."""
        na = self.na_value.encode() if isinstance(self.na_value, str) else self.na_value
        good = len(rows)
        cols: list[list[Any]] = []
        for j, (dtype, default) in enumerate(zip(self._dtypes, self._defaults)):
            raw = [r[j] for r in rows]
            empty = [not v or v == na for v in raw]
            if any(empty):
                if default is None:
                    good = min(good, empty.index(True))
                raw = [default if e else v for v, e in zip(raw, empty)]
            if dtype == OBJECT:
                cols.append([v if isinstance(v, bytes) else bytes(v) for v in raw])
                continue
            try:
                arr = np.array([v.strip() if isinstance(v, bytes) else v for v in raw[:good]])
                values = arr.astype(dtype) if arr.dtype.kind in "SU" else arr.astype(dtype)
                if dtype.kind in "iu" and arr.dtype.kind in "SU":
                    _check_ints(arr)
            except (ValueError, OverflowError):
                values, k = self._convert_slow(raw[:good], dtype)
                good = min(good, k)
            cols.append(list(values))
        return [c[:good] for c in cols], good

    @staticmethod
    def _convert_slow(raw: list[Any], dtype: np.dtype) -> tuple[list[Any], int]:
        out = []
        for v in raw:
            try:
                if isinstance(v, bytes):
                    s = v.strip().decode()
                    x = dtype.type(int(s)) if dtype.kind in "iu" else dtype.type(float(s))
                else:
                    x = dtype.type(v)
            except (ValueError, OverflowError):
                return out, len(out)
            out.append(x)
        return out, len(out)

    def _row_error(self, row: list[bytes]) -> InvalidArgumentError:
        na = self.na_value.encode() if isinstance(self.na_value, str) else self.na_value
        for j, (dtype, default) in enumerate(zip(self._dtypes, self._defaults)):
            v = row[j]
            if not v or v == na:
                if default is None:
                    return InvalidArgumentError(f"Field {j} is required but missing in record!")
                continue
            if dtype != OBJECT and not self._convert_slow([v], dtype)[0]:
                return InvalidArgumentError(f"Field {j} in record is not a valid {dtype.name}: {v!r}")
        return InvalidArgumentError(f"{_API}: a record could not be parsed: {row!r}")  # pragma: no cover


def _check_ints(arr: np.ndarray) -> None:
    """NumPy parses ``b"1.5"`` as an int column by truncation; TensorFlow rejects it."""
    for v in arr.tolist():
        s = v.decode() if isinstance(v, bytes) else v
        if "." in s or "e" in s or "E" in s:
            raise ValueError(s)


class _CsvChunks:
    """Chunks of parsed rows of one file; a bad record raises once, then reading goes on after it."""

    def __init__(self, ds: CsvDataset, path: str, gen: Iterator[tuple[int, list[bytes], list[int]]],
                 skip_header: bool):
        self._ds, self._path, self._gen = ds, path, gen
        self._skip_header = skip_header
        self._rest: tuple[int, list[bytes], list[int]] | None = None

    def __iter__(self) -> _CsvChunks:
        return self

    def __next__(self) -> tuple[int, list[Any]]:
        while True:
            if self._rest is not None:
                offset, recs, lens = self._rest
                self._rest = None
            else:
                try:
                    offset, recs, lens = next(self._gen)
                except StopIteration:
                    if self._skip_header:
                        self._skip_header = False
                        raise InvalidArgumentError(f"Can't read header of file {self._path}") from None
                    raise
            if self._skip_header:
                self._skip_header = False
                offset, recs, lens = offset + lens[0], recs[1:], lens[1:]
            if not recs:
                continue
            rows, error = self._ds.parse(recs)
            k = len(rows)
            if error is None:
                return offset, rows
            if k:
                self._rest = (offset + sum(lens[:k]), recs[k:], lens[k:])
                return offset, rows
            self._rest = (offset + lens[0], recs[1:], lens[1:]) if len(recs) > 1 else None
            raise error

    def close(self) -> None:
        self._gen.close()  # type: ignore[attr-defined]
