"""Auto-sharding: the rewrite of one input pipeline of W (DESIGN §4).

The rewrite walks the dataset graph from the output toward its sources.

- FILE: every reachable reader's file list (also readers made inside
  ``interleave``/``flat_map`` over a file list, and each input of ``zip`` /
  ``concatenate``) gets ``shard(W, i)``; shuffles of the file list are moved
  after the shard, so every pipeline shards the same order. The outermost
  ``batch(G)`` becomes ``batch(G_i)``, pipeline i's share of a global batch.
- DATA: nothing is rewritten; every pipeline reads everything and keeps its
  replicas' pieces of each global batch.
- AUTO: FILE, else DATA with one ``UserWarning`` saying why (never with one pipeline).
- OFF: only the batch is resized; every pipeline reads everything.
- HINT: ``shard(SHARD_HINT, SHARD_HINT)`` becomes ``shard(W, i)``; the batch is resized.

With one pipeline nothing is rewritten: the split of each batch is all there is.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from tpustrategy._src.data.core.options import SHARD_HINT, AutoShardPolicy
from tpustrategy._src.input import split

_PASS_THROUGH = {
    "MapDataset", "BatchDataset", "PaddedBatchDataset", "CacheDataset", "FilterDataset",
    "PrefetchDataset", "RepeatDataset", "ShardDataset", "ShuffleDataset", "SkipDataset",
    "TakeDataset", "OptionsDataset", "UnbatchDataset", "RebatchDataset",
}
_FUNCTION_DATASETS = {"InterleaveDataset", "FlatMapDataset"}
_MULTI_INPUT = {"ZipDataset", "ConcatenateDataset"}
_UNSHARDABLE = {"RangeDataset", "TensorDataset", "TensorSliceDataset", "GeneratorDataset"}
_BATCH_PATH = {"MapDataset", "PrefetchDataset", "OptionsDataset", "CacheDataset", "FilterDataset",
               "TakeDataset", "SkipDataset", "RepeatDataset"}


class _NotShardable(Exception):
    pass


class _TooFewFiles(Exception):
    def __init__(self, files: int, where: str):
        super().__init__(files, where)
        self.files, self.where = files, where


@dataclass
class ShardDecision:
    """What auto-sharding did to one pipeline (``DistributedDataset.explain_sharding()``)."""

    requested: AutoShardPolicy
    applied: str
    num_pipelines: int
    pipeline_id: int
    reason: str = ""
    changes: list[str] = field(default_factory=list)

    def explain(self) -> str:
        lines = [
            f"auto-shard policy {self.requested.name} -> applied {self.applied} "
            f"(pipeline {self.pipeline_id} of {self.num_pipelines})"
        ]
        if self.reason:
            lines.append(f"reason: {self.reason}")
        lines += [f"- {c}" for c in self.changes]
        return "\n".join(lines)


@dataclass
class Plan:
    dataset: Any
    mode: str  # "global": elements are global batches; "local": this pipeline's share
    global_batch: int | None
    drop_remainder: bool
    num_pipelines: int
    decision: ShardDecision


def find_batch(dataset: Any) -> Any:
    """The outermost batch node reachable through pass-through ops, or None."""
    node = dataset
    while True:
        name = type(node).__name__
        if name in ("BatchDataset", "PaddedBatchDataset"):
            return node
        if name in _BATCH_PATH and node.inputs:
            node = node.inputs[0]
            continue
        return None


def _resize_batch(dataset: Any, batch_node: Any, new_size: int) -> Any:
    """A copy of the graph where ``batch_node`` batches ``new_size`` examples."""
    from tpustrategy._src.data.core.graph import rewrite

    resized = batch_node._replace(batch_size=new_size)
    return rewrite(dataset, lambda node: resized if node is batch_node else None)


def _count(files: Any) -> int:
    n = files.cardinality()
    if n >= 0:
        return n
    return sum(1 for _ in files)


def _shard_file_list(files: Any, w: int, i: int, where: str, changes: list[str]) -> Any:
    """``files.shard(w, i)`` with upstream shuffles moved after the shard."""
    shuffles = []
    base = files
    while type(base).__name__ in ("ShuffleDataset", "PrefetchDataset", "OptionsDataset"):
        if type(base).__name__ == "ShuffleDataset":
            shuffles.append(base)
        base = base.inputs[0]
    n = _count(base)
    if n < w:
        raise _TooFewFiles(n, where)
    out = base.shard(w, i)
    for s in reversed(shuffles):
        out = out.shuffle(s.buffer_size, seed=s.seed, reshuffle_each_iteration=s.reshuffle_each_iteration)
    mine = list(range(i, n, w))
    changes.append(
        f"{where}: shard({w}, {i}) of its {n} file names -> files {mine}"
        + (" (file-list shuffle moved after the shard)" if shuffles else "")
    )
    return out


def _fn_makes_reader(node: Any) -> bool:
    from tpustrategy._src.data.core.graph import walk

    files = node.inputs[0]
    try:
        sample = next(iter(files.take(1)))
    except StopIteration:
        return False
    try:
        made = node.fn(sample)
    except Exception:
        return False
    return any(getattr(n, "is_reader", False) for n in walk(made)) if made is not None else False


def _file_rewrite(node: Any, w: int, i: int, changes: list[str]) -> Any:
    name = type(node).__name__
    if getattr(node, "is_reader", False):
        return node.with_inputs(_shard_file_list(node.filenames, w, i, name, changes))
    if name in _FUNCTION_DATASETS and _fn_makes_reader(node):
        return node.with_inputs(_shard_file_list(node.inputs[0], w, i, f"{name} of readers", changes))
    if name in _MULTI_INPUT:
        return node.with_inputs(*[_file_rewrite(x, w, i, changes) for x in node.inputs])
    if name in _PASS_THROUGH or name in _FUNCTION_DATASETS or getattr(node, "autoshard_pass_through", False):
        # ``autoshard_pass_through``: a one-input transformation that TensorFlow's
        # FILE rewrite walks through (window, scan, unique, group_by_window, ...).
        return node.with_inputs(_file_rewrite(node.inputs[0], w, i, changes))
    if name in _UNSHARDABLE:
        raise _NotShardable(f"Found an unshardable source dataset: {name}")
    raise _NotShardable(
        "Did not find a shardable source, walked to a node which is not a dataset: "
        f"{name}. Consider either turning off auto-sharding or switching the "
        "auto_shard_policy to DATA to shard this dataset."
    )


def _hint_rewrite(node: Any, w: int, i: int, changes: list[str]) -> Any:
    new_inputs = tuple(_hint_rewrite(x, w, i, changes) for x in node.inputs)
    if any(a is not b for a, b in zip(new_inputs, node.inputs)):
        node = node.with_inputs(*new_inputs)
    if type(node).__name__ == "ShardDataset" and node.num_shards == SHARD_HINT and node.index == SHARD_HINT:
        changes.append(f"shard(SHARD_HINT, SHARD_HINT) -> shard({w}, {i})")
        return node._replace(num_shards=w, index=i)
    return node


def _try_file(dataset: Any, w: int, i: int, changes: list[str], requested: AutoShardPolicy,
              api: str) -> tuple[Any, str]:
    """FILE rewrite: ``(sharded, "")``, or ``(None, reason)`` under AUTO; raises under FILE."""
    try:
        return _file_rewrite(dataset, w, i, changes), ""
    except _TooFewFiles as e:
        reason = (
            f"FILE sharding needs at least as many files as input pipelines, but {e.where} has "
            f"{e.files} file(s) for {w} pipelines"
        )
        fix = (
            "\nFix: set options.experimental_distribute.auto_shard_policy = AutoShardPolicy.DATA "
            f"(or OFF) on the dataset, or split the input into at least {w} files."
        )
    except _NotShardable as e:
        reason, fix = str(e), ""
    if requested is AutoShardPolicy.FILE:
        raise ValueError(f"{api}: could not apply FILE based sharding: {reason}.{fix}") from None
    return None, reason


def _warn_fallback(reason: str, stacklevel: int) -> None:
    warnings.warn(
        "AUTO sharding policy will apply DATA sharding policy as it failed to apply FILE "
        f"sharding policy because of the following reason: {reason}. Every input pipeline "
        "reads the whole dataset and keeps only its own share.",
        UserWarning,
        stacklevel=stacklevel + 1,
    )


def _policy_of(dataset: Any) -> AutoShardPolicy:
    requested = dataset.options().experimental_distribute.auto_shard_policy
    return AutoShardPolicy(requested) if requested is not None else AutoShardPolicy.AUTO


def plan(dataset: Any, num_pipelines: int, pipeline_id: int, num_replicas: int) -> Plan:
    """Rewrites ``dataset`` into pipeline ``pipeline_id`` of ``num_pipelines``."""
    requested = _policy_of(dataset)
    batch = find_batch(dataset)
    g = batch.batch_size if batch is not None else None
    drop = bool(batch.drop_remainder) if batch is not None else False
    w, i = num_pipelines, pipeline_id
    decision = ShardDecision(requested, "", w, i)
    if w == 1:
        decision.applied = "none"
        decision.reason = "one input pipeline: each global batch is split across the replicas"
        return Plan(dataset, "global", g, drop, w, decision)
    per = num_replicas // w

    def data_plan(reason: str = "") -> Plan:
        decision.applied, decision.reason = "DATA", reason
        decision.changes = [
            f"pipeline {i} keeps the pieces of replicas {list(range(i * per, (i + 1) * per))} "
            "of every global batch"
        ]
        return Plan(dataset, "global", g, drop, w, decision)

    changes: list[str] = []

    def local_plan(applied: str, ds: Any) -> Plan:
        node = find_batch(ds)
        if node is not None:
            share = split.pipeline_share(g, num_replicas, w, i)
            changes.append(f"batch({g}) -> batch({share}): pipeline {i}'s replicas' share of each global batch")
            ds = _resize_batch(ds, node, share)
        decision.applied, decision.changes = applied, changes
        return Plan(ds, "local", g, drop, w, decision)

    if requested is AutoShardPolicy.DATA:
        return data_plan()
    # Every pipeline must take the same decision, so look at all of their shares.
    starved = [j for j in range(w) if g is not None and split.pipeline_share(g, num_replicas, w, j) == 0]
    if starved:
        reason = (
            f"the global batch size {g} gives pipeline {starved[0]} no examples ({num_replicas} "
            f"replicas over {w} pipelines: its replicas' pieces are all empty)"
        )
        if requested is not AutoShardPolicy.AUTO:
            raise ValueError(
                f"experimental_distribute_dataset: with auto_shard_policy {requested.name}, {reason}.\n"
                f"Fix: use a global batch size of at least {num_replicas} (one example per replica), "
                "or AutoShardPolicy.DATA."
            )
        _warn_fallback(reason, stacklevel=4)
        return data_plan(f"AUTO fell back to DATA: {reason}")
    if requested in (AutoShardPolicy.FILE, AutoShardPolicy.AUTO):
        sharded, reason = _try_file(dataset, w, i, changes, requested, "experimental_distribute_dataset")
        if sharded is not None:
            return local_plan("FILE", sharded)
        _warn_fallback(reason, stacklevel=4)
        return data_plan(f"AUTO fell back to DATA: {reason}")
    if requested is AutoShardPolicy.HINT:
        return local_plan("HINT", _hint_rewrite(dataset, w, i, changes))
    decision.reason = "every input pipeline reads the whole dataset"
    return local_plan("OFF", dataset)


def auto_shard_dataset(dataset: Any, num_workers: int, index: int, num_replicas_in_sync: int | None = None) -> Any:
    """One worker's share of an element stream (TensorFlow's ``input_ops.auto_shard_dataset``).

    The dataset-level view of auto-sharding, without splitting batches across
    replicas: FILE shards the file lists; DATA (and AUTO's fallback) keeps
    elements ``index, index + num_workers, ...``; HINT fills ``SHARD_HINT``;
    OFF returns the dataset unchanged.

    Args:
      dataset: a ``tpustrategy.data.Dataset``.
      num_workers: the number of workers (input pipelines), > 0.
      index: this worker's index in ``[0, num_workers)``.
      num_replicas_in_sync: accepted for compatibility; unused here.

    Returns:
      The rewritten dataset for worker ``index``.
    """
    if not isinstance(num_workers, int) or num_workers <= 0:
        raise ValueError(f"num_workers must be greater than zero. Received: {num_workers!r}.")
    if not isinstance(index, int) or not 0 <= index < num_workers:
        raise ValueError(f"index must be between 0 and {num_workers - 1}. Received: {index!r}.")
    requested = _policy_of(dataset)
    if requested is AutoShardPolicy.OFF or (requested is AutoShardPolicy.FILE and num_workers == 1):
        return dataset
    changes: list[str] = []
    if requested is AutoShardPolicy.HINT:
        return _hint_rewrite(dataset, num_workers, index, changes)
    if requested in (AutoShardPolicy.FILE, AutoShardPolicy.AUTO):
        sharded, reason = _try_file(dataset, num_workers, index, changes, requested, "auto_shard_dataset")
        if sharded is not None:
            return sharded
        if num_workers > 1:
            _warn_fallback(reason, stacklevel=2)
    return dataset.shard(num_workers, index)
