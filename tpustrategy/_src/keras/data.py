"""``fit`` / ``evaluate`` / ``predict`` over ``tpsd`` datasets and distributed datasets.

In one process a ``tpsd.Dataset``'s global batches go to the devices as they
are, one ``device_put`` per step, as Keras does with arrays (``_global_batches``:
split over ``"replica"``, or whole on every device for a partial batch the
replicas do not divide). With several processes it is distributed with the
strategy's own ``experimental_distribute_dataset`` (auto-sharded across
processes); a distributed dataset is used as it is. Then each step's
per-replica pieces become one global batch for Keras's trainer:

- equal pieces (every full batch): ``[b, ...]`` split over ``"replica"``, each
  device holding its replica's piece: host pieces in one transfer, pieces
  already on the devices reshaped from ``[R, b/R, ...]`` by one program for all
  of the step's leaves (no data cross devices);
- unequal pieces (a partial last batch): the true rows of every replica are
  gathered into one replicated ``[n, ...]`` batch, so Keras computes on exactly
  the examples single-device Keras would (losses, metrics and the loss
  tracker's weight ``n``), each counted once.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tpustrategy._src.execution import dispatch
from tpustrategy._src.values.distributed import DistributedValues
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS


def is_distributed_dataset(x: Any) -> bool:
    return type(x).__name__ in ("DistributedDataset", "DistributedDatasetsFromFunction")


def is_tps_dataset(x: Any) -> bool:
    from tpustrategy._src.data.core.dataset import Dataset

    return isinstance(x, Dataset) or is_distributed_dataset(x)


def _is_even(leaf: Any) -> bool:
    shapes = leaf.shapes
    return len(set(shapes)) == 1 and bool(shapes[0])


def _ragged_batch(leaf: Any, strategy: Any) -> Any:
    mesh = strategy.mesh
    shapes = leaf.shapes
    stacked = leaf.stacked_array(NamedSharding(mesh, P(REPLICA_AXIS)))
    pad = stacked.shape[1] if stacked.ndim > 1 else 0
    rows = np.concatenate([np.arange(r * pad, r * pad + (s[0] if s else 0)) for r, s in enumerate(shapes)])
    return _gather_rows(stacked, rows, mesh)


def _on_host(leaf: Any) -> bool:
    return not leaf.has_stacked and all(isinstance(c, np.ndarray) for c in leaf.values)


def _merge_even(leaves: list[Any], strategy: Any) -> list[Any]:
    """``[R, b/R, ...]`` -> ``[b, ...]`` split over ``"replica"``: one program for all leaves (no copy across devices)."""
    split = NamedSharding(strategy.mesh, P(REPLICA_AXIS))
    fn = _MERGES.get(split)
    if fn is None:
        fn = _MERGES[split] = jax.jit(lambda xs: [x.reshape((-1, *x.shape[2:])) for x in xs], out_shardings=split)
    merged = fn([leaf.stacked_array(split) for leaf in leaves])
    dispatch.track(merged)
    return merged


_MERGES: dict[Any, Any] = {}


def _gather_rows(stacked: Any, rows: np.ndarray, mesh: Any) -> Any:
    key = (stacked.shape, stacked.dtype, tuple(rows.tolist()), id(mesh))
    fn = _GATHERS.get(key)
    if fn is None:
        idx = np.asarray(rows, np.int32)

        def gather(a: Any) -> Any:
            return a.reshape((a.shape[0] * a.shape[1], *a.shape[2:]))[idx]

        fn = _GATHERS[key] = jax.jit(gather, out_shardings=NamedSharding(mesh, P()))
    gathered = fn(stacked)
    dispatch.track(gathered)   # a gather across devices: a program with a collective
    return gathered


_GATHERS: dict[Any, Any] = {}


def _global_batches(dataset: Any, strategy: Any) -> Any:
    """A ``tpsd.Dataset``'s global batches placed for Keras in one process: one ``device_put`` per step.

    A batch the replicas divide is split over ``"replica"``; a partial last batch they do not divide
    goes whole to every device, so Keras computes on exactly single-device Keras's examples.
    """
    mesh, n = strategy.mesh, strategy.num_replicas_in_sync
    split, whole = NamedSharding(mesh, P(REPLICA_AXIS)), NamedSharding(mesh, P())
    for batch in dataset.as_numpy_iterator():
        leaves, treedef = jax.tree_util.tree_flatten(batch)
        if not leaves or any(np.ndim(a) == 0 for a in leaves):
            raise ValueError(
                "Model.fit/evaluate/predict: the tpsd dataset yields unbatched elements (a leaf without a batch "
                f"dimension; element shapes {[np.shape(a) for a in leaves]}).\nFix: call "
                ".batch(global_batch_size) on the dataset.")
        placed = jax.device_put(leaves, [split if np.shape(a)[0] % n == 0 else whole for a in leaves])
        out = jax.tree_util.tree_unflatten(treedef, placed)
        yield tuple(out) if isinstance(out, list) else out


def to_keras_batch(element: Any, strategy: Any) -> Any:
    """One distributed step as a Keras batch: a tuple ``(x, y, sample_weight)`` of global arrays."""
    leaves, treedef = jax.tree_util.tree_flatten(element, is_leaf=lambda v: isinstance(v, DistributedValues))
    out = list(leaves)
    even: list[int] = []
    host: dict[int, tuple[np.ndarray, Any]] = {}   # placed together: one device_put for the step
    for i, leaf in enumerate(leaves):
        if not isinstance(leaf, DistributedValues):
            continue
        on_host = _on_host(leaf)
        if not _is_even(leaf):
            if on_host and all(np.ndim(c) for c in leaf.values):
                host[i] = (np.concatenate(leaf.values), NamedSharding(strategy.mesh, P()))
            else:
                out[i] = _ragged_batch(leaf, strategy)
        elif on_host:
            host[i] = (np.concatenate(leaf.values), NamedSharding(strategy.mesh, P(REPLICA_AXIS)))
        else:
            even.append(i)
    if host:
        placed = jax.device_put([a for a, _ in host.values()], [sh for _, sh in host.values()])
        for i, array in zip(host, placed):
            out[i] = array
    if even:
        for i, merged in zip(even, _merge_even([leaves[i] for i in even], strategy)):
            out[i] = merged
    batch = jax.tree_util.tree_unflatten(treedef, out)
    return tuple(batch) if isinstance(batch, list) else batch


def _adapter_base() -> type:
    import tpustrategy._src.keras.internals as internals

    return internals.data_adapter()


_CLASS: list[type] = []


def adapter_class() -> type:
    if _CLASS:
        return _CLASS[0]

    class StrategyDataAdapter(_adapter_base()):
        """Keras's data adapter for tpsd datasets and distributed datasets."""

        def __init__(self, x: Any, strategy: Any, steps: int | None = None, class_weight: Any = None):
            if steps is None:
                check_steps_given(x)
            self._strategy = strategy
            if class_weight is not None:
                if is_distributed_dataset(x):
                    refuse_class_weight(class_weight)
                x = with_class_weight(x, class_weight)
            self._given = x
            # One process: the global batches go straight to the devices (no split into per-replica
            # pieces and back); several: the strategy's distribution auto-shards them across processes.
            self._direct = strategy is not None and not is_distributed_dataset(x) and jax.process_count() == 1
            if strategy is not None and not is_distributed_dataset(x) and not self._direct:
                x = strategy.experimental_distribute_dataset(x)
            self._source = x
            # Keras's rule for datasets (its tf.data adapter): the dataset's own cardinality, None when
            # infinite or unknown, whatever `steps_per_epoch` says; so with `ds.repeat()` and
            # `steps_per_epoch` Keras's epoch iterator keeps one iterator across epochs.
            n = int(x.cardinality()) if hasattr(x, "cardinality") else -2
            self._num_batches = n if n >= 0 else None

        def get_jax_iterator(self) -> Any:
            if self._strategy is None:
                for batch in self._source.as_numpy_iterator():
                    yield tuple(batch) if isinstance(batch, list) else batch
                return
            if self._direct:
                yield from _global_batches(self._given, self._strategy)
                return
            for element in self._source:
                yield to_keras_batch(element, self._strategy)

        def get_numpy_iterator(self) -> Any:
            for batch in self.get_jax_iterator():
                yield jax.tree_util.tree_map(np.asarray, batch)

        def get_tf_dataset(self) -> Any:
            raise NotImplementedError("tpustrategy's Keras data adapter yields JAX arrays only.")

        def get_torch_dataloader(self) -> Any:
            raise NotImplementedError("tpustrategy's Keras data adapter yields JAX arrays only.")

        @property
        def num_batches(self) -> int | None:
            return self._num_batches

        @property
        def batch_size(self) -> int | None:
            return None

        @property
        def has_partial_batch(self) -> bool | None:
            return None

        @property
        def partial_batch_size(self) -> int | None:
            return None

    _CLASS.append(StrategyDataAdapter)
    return StrategyDataAdapter


_STEPS_FIX = ("\nFix: pass the number of batches to run (fit: steps_per_epoch, and validation_steps for "
              "validation data; evaluate / predict: steps)")


def check_steps_given(x: Any) -> None:
    """tf-keras's rule for a dataset given without a step count (``DatasetAdapter._validate_args`` in
    tf-keras's ``keras/engine/data_adapter.py``): a distributed dataset, or an infinite one, raises
    ``ValueError`` at once, with tf-keras's message, instead of running forever."""
    from tpustrategy._src.data.core.options import INFINITE_CARDINALITY

    if is_distributed_dataset(x):
        raise ValueError(
            "When providing a distributed dataset, you must specify the number of steps to run."
            + _STEPS_FIX + ", or pass the tpsd.Dataset itself: fit distributes it and counts its batches.")
    cardinality = x.cardinality() if hasattr(x, "cardinality") else None
    if cardinality is not None and int(cardinality) == INFINITE_CARDINALITY:
        raise ValueError(
            "When providing an infinite dataset, you must specify the number of steps to run (if you did "
            "not intend to create an infinite dataset, make sure to not call `repeat()` on the dataset)."
            + _STEPS_FIX + ", or call repeat(count) with a count.")


def with_class_weight(dataset: Any, class_weight: dict[int, float]) -> Any:
    """Keras's ``class_weight`` over a dataset of ``(x, y)`` batches: ``(x, y, weights)`` (its tf.data rule)."""
    table = np.asarray([class_weight.get(c, 1.0) for c in range(max(class_weight) + 1)], np.float32)

    def add_weights(*element: Any) -> Any:
        if len(element) == 1 and isinstance(element[0], tuple):
            element = element[0]
        if len(element) != 2:
            raise ValueError(
                "Model.fit: `class_weight` needs a dataset of (x, y) batches (Keras cannot combine it with "
                f"sample weights); the dataset yields {len(element)} components.\nFix: drop `class_weight` "
                "or the dataset's sample weights.")
        x, y = element
        if isinstance(y, (tuple, list, dict)):
            raise ValueError(
                "Model.fit: `class_weight` is only supported for models with a single output (the dataset's "
                f"y is a {type(y).__name__}).\nFix: put per-example weights into the dataset instead.")
        y = np.asarray(y)
        if y.ndim >= 2:
            classes = np.argmax(y, -1) if y.shape[-1] > 1 else np.round(np.squeeze(y, -1))
        else:
            classes = np.round(y)
        return x, y, table[classes.astype(np.int32)]

    return dataset.map(add_weights)


def refuse_class_weight(class_weight: Any) -> None:
    raise ValueError(
        "Model.fit: `class_weight` cannot be applied to a distributed dataset (its per-replica batches are "
        f"already placed). Received: class_weight={class_weight!r:.60}.\nFix: pass the tpsd dataset itself to "
        "fit (fit distributes it), or add the weights with dataset.map before distributing it.")


def check_unused(api: str, y: Any, sample_weight: Any, batch_size: Any) -> None:
    """Keras's rule for datasets: targets, weights and batch size come from the dataset."""
    for name, value in (("y", y), ("sample_weight", sample_weight), ("batch_size", batch_size)):
        if value is not None:
            raise ValueError(
                f"{api}: `{name}` cannot be given with a tpsd dataset (the dataset yields "
                f"(x, y[, sample_weight]) global batches). Received: {name}={value!r:.60}.\nFix: put "
                f"{name} into the dataset, e.g. tpsd.Dataset.from_tensor_slices((x, y)).batch(global_batch_size)."
            )
