"""``distribute_datasets_from_function``: one user-built pipeline per process.

``dataset_fn(InputContext(W, i, R))`` is called once per pipeline (once per
replica with ``InputReplicationMode.PER_REPLICA`` on MirroredStrategy). No
rebatching or sharding: the dataset yields per-replica batches and the
pipeline's replicas take consecutive elements. When the data runs out in the
middle of a step the remaining replicas get empty pieces; a step with no
data ends the iteration (scalar elements, which have no batch dimension to
empty, end it at the last complete step, as in TensorFlow). With batches of a
static size (``drop_remainder=True``) on one process, ``next()`` ends the
iteration at such a partial step instead, as TensorFlow's ``get_next`` does;
``get_next_as_optional`` and a ``for`` loop inside ``tps.function`` still give
it (``statically_shaped``; ``distributed._StepSource.tps_pull``).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from tpustrategy._src.context import contracts
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY
from tpustrategy._src.input import device_prefetch, interfaces, split
from tpustrategy._src.input.distributed import _check_not_in_replica, _StepSource
from tpustrategy._src.input.input_context import (
    InputContext,
    InputReplicationMode,
    check_options,
    check_placement,
)


class DistributedDatasetsFromFunction(interfaces.DistributedDataset):
    """The result of ``distribute_datasets_from_function`` (iterable, no transformations)."""

    def __init__(self, strategy: contracts.StrategyContract, dataset_fn: Any, options: Any = None, *,
                 input_pipeline: tuple[int, int] | None = None):
        from tpustrategy._src.data.core.dataset import Dataset

        options = check_options(options)
        n = strategy.num_replicas_in_sync
        pipeline_id, num_pipelines = input_pipeline or (jax.process_index(), jax.process_count())
        self._strategy, self._options = strategy, options
        self._num_local = n // num_pipelines
        per_replica = options.experimental_replication_mode is InputReplicationMode.PER_REPLICA
        if per_replica and not strategy.supports_per_replica_input:  # MirroredStrategy (contracts)
            raise NotImplementedError(
                "InputReplicationMode.PER_REPLICA is only supported in MirroredStrategy's "
                f"distribute_datasets_from_function; {type(strategy).__name__} builds one "
                "input pipeline per process.\nFix: use InputReplicationMode.PER_WORKER."
            )
        check_placement(options)
        if per_replica:
            contexts = [InputContext(n, pipeline_id * self._num_local + j, n) for j in range(self._num_local)]
        else:
            contexts = [InputContext(num_pipelines, pipeline_id, n)]
        self._contexts = contexts
        self._datasets = []
        for ctx in contexts:
            ds = dataset_fn(ctx)
            if not isinstance(ds, Dataset):
                raise TypeError(
                    "distribute_datasets_from_function: `dataset_fn` must return a "
                    f"tpustrategy.data.Dataset; it returned {type(ds).__name__}."
                )
            # Batches are placed on the replicas' devices here: a trailing prefetch_to_device is not needed.
            self._datasets.append(device_prefetch.without_device_copies(ds))
        self._per_replica = per_replica

    def __iter__(self) -> _FromFunctionIterator:
        _check_not_in_replica()
        from tpustrategy._src.execution import pulls

        iterator = _FromFunctionIterator(self)
        pulls.register_iterator(iterator, self)
        return iterator

    @property
    def element_spec(self) -> Any:
        from tpustrategy._src.data.core.structure import TensorSpec
        from tpustrategy._src.values.distributed import PerReplica

        spec = self._datasets[0].element_spec

        def one(s: Any) -> Any:
            local = TensorSpec((None,) + tuple(s.shape[1:]) if s.shape else (), s.dtype)
            return local if self._strategy.num_replicas_in_sync == 1 else PerReplica([local] * self._num_local)

        return jax.tree_util.tree_map(one, spec, is_leaf=lambda x: isinstance(x, TensorSpec))

    def cardinality(self) -> int:
        return self._datasets[0].cardinality()


class _FromFunctionIterator(_StepSource, interfaces.DistributedIterator):
    @property
    def element_spec(self) -> Any:
        return self._owner.element_spec

    def __init__(self, owner: DistributedDatasetsFromFunction):
        self._owner = owner
        self._hosts = [iter(ds) for ds in owner._datasets]
        super().__init__(owner._strategy, owner._options, coordinate=len(owner._contexts) == 1 and jax.process_count() > 1)
        dataset = owner._datasets[0]
        self._static_batches = (jax.process_count() == 1 and dataset.cardinality() != INFINITE_CARDINALITY
                                and statically_shaped(dataset.element_spec))

    def _host_state(self) -> Any:
        return [h.get_state() for h in self._hosts]

    def _set_host_state(self, state: Any) -> None:
        for h, s in zip(self._hosts, state):
            h.set_state(s)

    def _empty_pieces(self) -> list[Any]:
        empty = split.empty_like_spec(self._owner._datasets[0].element_spec)
        return [empty] * self._owner._num_local

    def _next_pieces(self) -> tuple[list[Any], Any]:
        n = self._owner._num_local
        pieces: list[Any] = []
        if self._owner._per_replica:
            for h in self._hosts:
                pieces.append(next(h, _MISSING))
        else:
            for _ in range(n):
                element = next(self._hosts[0], _MISSING)
                if element is _MISSING:
                    break
                pieces.append(element)
            pieces += [_MISSING] * (n - len(pieces))
        present = [p for p in pieces if p is not _MISSING]
        if not present:
            raise StopIteration
        if len(present) < n:
            if any(np.ndim(leaf) == 0 for leaf in jax.tree_util.tree_leaves(present[0])):
                raise StopIteration
            empty = split.empty_like_spec(self._owner._datasets[0].element_spec)
            pieces = [p if p is not _MISSING else empty for p in pieces]
            self._step_partial = True
        return pieces, None


def statically_shaped(element_spec: Any) -> bool:
    """TensorFlow's ``input_lib._is_statically_shaped``: every dense component's shape is fully
    known, and a ragged batch's batch dimension is. A ``sparse_batch`` result's batch dimension is
    never known; a ``SparseTensor`` made by a map function carries no static shape here and does
    not decide."""
    from tpustrategy._src.data.core.structure import TensorSpec
    from tpustrategy._src.data.transformations.ragged_batch import RaggedBatch
    from tpustrategy._src.data.transformations.sparse_batch import SparseBatch
    from tpustrategy._src.sparse.tensor import SparseTensor

    def special(x: Any) -> bool:
        return isinstance(x, (RaggedBatch, SparseBatch, SparseTensor))

    for spec in jax.tree_util.tree_leaves(element_spec, is_leaf=lambda x: special(x) or isinstance(x, TensorSpec)):
        if isinstance(spec, RaggedBatch):
            if spec.row_lengths.shape[0] is None:
                return False
        elif isinstance(spec, SparseBatch):
            return False
        elif isinstance(spec, TensorSpec):
            if spec.shape is None or any(d is None for d in spec.shape):
                return False
    return True


_MISSING = object()
