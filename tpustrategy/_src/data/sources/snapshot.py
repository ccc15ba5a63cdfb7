"""`Dataset.snapshot`: the first complete pass is written under ``path``; later passes read it.

The on-disk form is `save_load`'s, in ``path/<fingerprint>/`` where the
fingerprint is `Dataset.fingerprint` of the input pipeline (TensorFlow also
keys snapshots by a hash of the input graph), so a changed pipeline writes a
new snapshot. While no finished snapshot exists, a pass reads the input and
streams every element into ``path/run-<pid>-<n>/``; when the pass ends the
run is renamed into place, so a pass abandoned half-way leaves nothing to read.
Once it exists, passes read it through ``reader_func`` (default: the shards
interleaved in the order written).

Checkpoints: a reading pass checkpoints as a loaded dataset (file offsets,
cost independent of the position). A writing pass checkpoints as its input;
a restored writing pass resumes the input and does not write (the next
complete pass writes the snapshot).
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state

_COMPRESSIONS = {"AUTO": "", "NONE": "", "": "", None: "", "GZIP": "GZIP", "ZLIB": "ZLIB", "SNAPPY": ""}
_RUNS = itertools.count()


class SnapshotDataset(Dataset):
    """Persists the input on its first complete pass (``tf.data.Dataset.snapshot``).

    Attributes:
      path: the snapshot directory.
      compression: "AUTO" (none here), None, "GZIP" or "ZLIB" ("SNAPPY" is written uncompressed).
      reader_func: ``reader_func(shards)`` -> the elements (as in `Dataset.load`).
      shard_func: ``shard_func(element)`` -> the shard index (as in `Dataset.save`).
    """

    autoshard_pass_through = True
    _params = ("path", "compression", "reader_func", "shard_func")

    def __init__(self, input_dataset: Dataset, path: Any, compression: str | None = "AUTO",
                 reader_func: Callable[[Dataset], Dataset] | None = None,
                 shard_func: Callable[..., Any] | None = None):
        super().__init__((input_dataset,))
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"Dataset.snapshot: path must be a str or os.PathLike; received {type(path).__name__}.")
        key = compression.upper() if isinstance(compression, str) else compression
        if key not in _COMPRESSIONS:
            raise ValueError(
                "Dataset.snapshot: compression must be 'AUTO', 'GZIP', 'SNAPPY', 'ZLIB' or None; "
                f"received {compression!r}."
            )
        self.path, self.compression = os.fspath(path), compression
        self._ctype = _COMPRESSIONS[key]
        self.reader_func, self.shard_func = reader_func, shard_func

    def _compute_spec(self, input_spec: Any) -> Any:
        return input_spec(self.inputs[0])

    def _compute_cardinality(self) -> int:
        return self.inputs[0].cardinality()

    def snapshot_dir(self) -> str:
        """Where the finished snapshot of this input lives."""
        return os.path.join(self.path, f"{int(self.inputs[0].fingerprint()):016x}")

    def _reader(self, ctx: IterContext) -> NodeIterator | None:
        from tpustrategy._src.data.sources.save_load import LoadDataset, read_meta

        final = self.snapshot_dir()
        if read_meta(final, "Dataset.snapshot") is None:
            return None
        return LoadDataset.build(final, reader_func=self.reader_func)._make_iterator(ctx)

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        reader = self._reader(ctx)
        if reader is not None:
            return _SnapshotIterator(None, reader, self, ctx)
        return _SnapshotIterator(self.inputs[0]._make_iterator(ctx), None, self, ctx)


class _SnapshotIterator(NodeIterator):
    """Reads a finished snapshot (``reader``), or reads the input and writes one (``it``)."""

    def __init__(self, it: NodeIterator | None, reader: NodeIterator | None, ds: SnapshotDataset, ctx: IterContext):
        from tpustrategy._src.data.sources.save_load import ShardWriter

        self._it, self._reader, self._ds, self._ctx = it, reader, ds, ctx
        self._writer: Any = None
        self._run = ""
        if it is not None:
            self._run = os.path.join(ds.path, f"run-{os.getpid()}-{next(_RUNS)}")
            self._writer = ShardWriter(self._run, ds._ctype, ds.shard_func, "Dataset.snapshot")

    def __next__(self) -> Any:
        if self._reader is not None:
            return self._reader.__next__()
        assert self._it is not None
        try:
            x = self._it.__next__()
        except StopIteration:
            self._finish()
            raise
        if self._writer is not None:
            self._writer.add(x)
        return x

    def _finish(self) -> None:
        writer, self._writer = self._writer, None
        if writer is None:
            return
        writer.finish(self._ds.inputs[0].element_spec)
        final = self._ds.snapshot_dir()
        if os.path.exists(final):  # another pass finished first
            shutil.rmtree(self._run, ignore_errors=True)
        else:
            os.replace(self._run, final)

    def _abandon(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.abandon()
            shutil.rmtree(self._run, ignore_errors=True)

    def get_state(self) -> dict[str, Any]:
        if self._reader is not None:
            return {"mode": "read", "state": self._reader.get_state()}
        assert self._it is not None
        return {"mode": "write", "state": self._it.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("mode", "state"), "snapshot")
        if state["mode"] == "read":
            if self._reader is None:
                self._reader = self._ds._reader(self._ctx)
                if self._reader is None:
                    raise ValueError(
                        f"set_state: the state reads the snapshot under {self._ds.path}, but no finished "
                        "snapshot is there.\nFix: restore on the machine (and path) that wrote it."
                    )
                self._abandon()
            self._reader.set_state(state["state"])
            return
        if self._it is None:
            self._it = self._ds.inputs[0]._make_iterator(self._ctx)
            if self._reader is not None:
                self._reader.close()
                self._reader = None
        self._it.set_state(state["state"])
        self._abandon()

    def close(self) -> None:
        self._abandon()
        for it in (self._it, self._reader):
            if it is not None:
                it.close()
