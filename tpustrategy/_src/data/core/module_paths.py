"""Where the modules of ``data`` lived before the subpackages (one flat package), and where they are now.

Two things outlive a module move and must not change with it:

* a namedtuple in an iterator checkpoint is named by its module (`state_codec`): a state
  written under an old path still finds its class (`current_module`);
* `Dataset.fingerprint` hashes the modules of nodes and functions, and ``snapshot`` keeps
  its files under the fingerprint: the hash uses the flat path (`stable_module`), so a
  snapshot written before the move is found again.
"""

from __future__ import annotations

_PREFIX = "tpustrategy._src.data."

# The flat module name under ``data`` -> its path under ``data`` now.
MOVED = {
    "_compression": "sources._compression",
    "_crc": "sources._crc",
    "_element_codec": "sources._element_codec",
    "_example_layout": "parsing._example_layout",
    "_seeds": "core.seeds",
    "args": "core.args",
    "batch": "transformations.batch",
    "batched_features": "parsing.batched_features",
    "bucket": "transformations.bucket",
    "cache": "transformations.cache",
    "cardinality": "transformations.cardinality",
    "concatenate": "transformations.concatenate",
    "counter": "sources.counter",
    "csv_dataset": "sources.csv_dataset",
    "dataset": "core.dataset",
    "dataset_functions": "transformations.dataset_functions",
    "dataset_more": "core.dataset_more",
    "dataset_sources": "core.dataset_sources",
    "directed_interleave": "transformations.directed_interleave",
    "example_proto": "parsing.example_proto",
    "experimental_ops": "transformations.experimental_ops",
    "filter": "transformations.filter",
    "fingerprint": "core.fingerprint",
    "flat_map": "transformations.flat_map",
    "from_generator": "sources.from_generator",
    "from_tensors": "sources.from_tensors",
    "graph": "core.graph",
    "group_by_reducer": "transformations.group_by_reducer",
    "group_by_window": "transformations.group_by_window",
    "ignore_errors": "transformations.ignore_errors",
    "interleave": "transformations.interleave",
    "iterator": "core.iterator",
    "list_files": "sources.list_files",
    "make_csv_dataset": "sources.make_csv_dataset",
    "map": "transformations.map",
    "nested_spec": "core.nested_spec",
    "optional": "core.optional",
    "options": "core.options",
    "options_dataset": "transformations.options_dataset",
    "padded_batch": "transformations.padded_batch",
    "parallel": "parallel.threads",
    "parsing": "parsing.example",
    "prefetch": "transformations.prefetch",
    "ragged_batch": "transformations.ragged_batch",
    "random_dataset": "sources.random_dataset",
    "range_dataset": "sources.range_dataset",
    "readers": "sources.readers",
    "record_io": "sources.record_io",
    "rejection_resample": "transformations.rejection_resample",
    "repeat": "transformations.repeat",
    "rest_after_error": "transformations.rest_after_error",
    "save_load": "sources.save_load",
    "scan": "transformations.scan",
    "shard": "transformations.shard",
    "shuffle": "transformations.shuffle",
    "skip": "transformations.skip",
    "snapshot": "sources.snapshot",
    "sparse_batch": "transformations.sparse_batch",
    "specs": "core.specs",
    "state_codec": "core.state_codec",
    "string_scalar": "core.string_scalar",
    "structure": "core.structure",
    "take": "transformations.take",
    "take_while": "transformations.take_while",
    "unbatch": "transformations.unbatch",
    "unique": "transformations.unique",
    "window": "transformations.window",
    "writer": "sources.writer",
    "zip": "transformations.zip",
}
_FLAT = {new: old for old, new in MOVED.items()}


def current_module(name: str) -> str:
    """The module path now of ``name`` (a flat ``tpustrategy._src.data.X`` path maps to its new place)."""
    if name.startswith(_PREFIX):
        rest = name[len(_PREFIX):]
        if rest in MOVED:
            return _PREFIX + MOVED[rest]
    return name


def stable_module(name: str) -> str:
    """The flat path of a ``data`` module (``...data.transformations.map`` -> ``...data.map``); others unchanged."""
    if name.startswith(_PREFIX):
        rest = name[len(_PREFIX):]
        if rest in _FLAT:
            return _PREFIX + _FLAT[rest]
    return name
