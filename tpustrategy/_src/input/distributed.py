"""Distributed datasets and iterators (``experimental_distribute_dataset``).

A ``DistributedDataset`` wraps one input pipeline per process (this
process's, rewritten by the auto-shard plan) and turns each of its elements
into one step: the local replicas' pieces (split by ``split``) as
``PerReplica`` values, on the devices when ``experimental_fetch_to_device``.
Steps are prepared ahead on a background thread (``prefetch``). Iteration ends
when no replica anywhere has data; a pipeline that ends first feeds empty
pieces until then.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from tpustrategy._src.context import stack as context
from tpustrategy._src.errors import InvalidArgumentError, OutOfRangeError
from tpustrategy._src.input import autoshard, device_prefetch, interfaces, split, to_device
from tpustrategy._src.input.input_context import (
    InputOptions,
    InputReplicationMode,
    check_options,
)
from tpustrategy._src.input.prefetch import Prefetcher
from tpustrategy._src.values.distributed import PerReplica

_SPLIT_KEY = "tps_split_element"  # an iterator state taken in the middle of a split element

NEXT_IN_REPLICA_ERROR = (
    "next(iterator) should be called from outside of replica_fn. e.g. "
    "strategy.run(replica_fn, args=(next(iterator),))"
)


def _leading(piece: Any) -> int:
    """A piece's batch size (its first leaf's leading dimension, a sparse value's rows; -1 for scalars)."""
    leaves = jax.tree_util.tree_leaves(piece, is_leaf=split.is_sparse)
    if leaves and split.is_sparse(leaves[0]):
        return split.batch_rows(leaves[0])
    shape = np.shape(leaves[0]) if leaves and not isinstance(leaves[0], bytes) else ()
    return int(shape[0]) if shape else -1


class Optional:
    """What ``get_next_as_optional`` returns (``tf.experimental.Optional``)."""

    def __init__(self, value: Any = None, has_value: bool = False):
        self._value, self._has = value, has_value

    def has_value(self) -> bool:
        return self._has

    def get_value(self) -> Any:
        if not self._has:
            # TensorFlow: InvalidArgumentError (also a ValueError here, as before).
            raise InvalidArgumentError(
                "Optional.get_value(): the optional has no value (the input has ended).\n"
                "Fix: check optional.has_value() first, e.g. `while (opt := it.get_next_as_optional()).has_value():`.")
        return self._value


def _check_not_in_replica() -> None:
    entry = context.current_entry()
    if entry is not None and entry.replica_context is not None and not entry.replica_context.is_default:
        raise ValueError(NEXT_IN_REPLICA_ERROR)


class _StepSource:
    """Shared machinery of distributed iterators: host iterator, end agreement, prefetch."""

    def __init__(self, strategy: Any, options: InputOptions, coordinate: bool):
        self._strategy = strategy
        self._options = options
        self._coordinate = coordinate and jax.process_count() > 1
        self._agreement = None
        self._ahead: tuple[Any, Any, Any, Any] | None = None  # the step looked up one element ahead
        self._pulled_batch: int | None = None
        if self._coordinate:
            from tpustrategy._src.input.agreement import StepAgreement

            rule, sizes_of = self._agreement_rule()
            self._agreement = StepAgreement(rule, len(self._empty_pieces()), sizes_of)
        self._prefetcher = Prefetcher(self._produce, options.prefetch_to_device)
        if self._agreement is not None:
            self._agreement.cancelled = self._prefetcher.cancelled
        self._local_done = False
        self._first_replica = 0
        # TensorFlow's partial-step rule (``_enable_get_next_as_optional``): with batches of a
        # static size (``drop_remainder=True``) on one process, ``get_next`` ends the iteration
        # at a step some replica has no data for; ``get_next_as_optional`` and a ``for`` loop
        # inside ``tps.function`` (TensorFlow's autograph loop) still give that step.
        self._static_batches = False
        self._in_function = False      # created inside (or for) a tps.function's own loop
        self._optional_pull = False    # an eager get_next_as_optional is pulling
        self._ended_at_partial = False
        self._step_partial = False     # set by _next_pieces: some replica of this step has no data

    def _agreement_rule(self) -> tuple[Any, Any]:
        """What this pipeline proves about every process's steps (``agreement.Rule``), and f(b) -> sizes."""
        from tpustrategy._src.input.agreement import Rule

        return Rule(False, None, False, "one user-built pipeline per process: sizes are exchanged"), None

    # Subclasses: _host_state(), _set_host_state(state), _next_pieces() -> pieces list.
    def _produce(self) -> tuple[Any, Any]:
        """Runs on the prefetch thread: host work, the processes' agreement, the copies to the devices."""
        if not self._coordinate:
            state = self._host_state()
            self._step_partial = False
            pieces, whole = self._next_pieces()
            return state, self._group(pieces, whole), self._step_partial
        return self._agree()

    def _group(self, pieces: list[Any], whole: Any = None, global_sizes: list[int] | None = None) -> Any:
        return to_device.group(self._strategy, pieces, self._options.experimental_fetch_to_device, whole,
                               self._first_replica, global_sizes)

    def get_next(self) -> Any:
        _check_not_in_replica()
        from tpustrategy._src.execution import pulls

        traced = pulls.pull(self)
        if traced is not None:
            return traced
        return self.tps_pull()

    def tps_pull(self) -> Any:
        """The next step's batch, concretely (``context.contracts.PullableIterator``)."""
        if self._ended_at_partial:
            raise OutOfRangeError("End of sequence")
        try:
            produced = self._prefetcher.next()
        except StopIteration:
            raise OutOfRangeError("End of sequence") from None
        partial = len(produced) > 2 and produced[2]
        if partial and self._static_batches and not (self._in_function or self._optional_pull):
            self._ended_at_partial = True
            raise OutOfRangeError("End of sequence")
        return produced[1]

    def tps_created_in_function(self) -> None:
        """Marks an iterator that a ``tps.function`` makes itself (its ``for`` loop over a dataset):
        it gives a last step that only some replicas have data for, as TensorFlow's loop does."""
        self._in_function = True

    def _pull(self) -> tuple[Any, Any, Any, Any]:
        """``(state before, pieces, whole, global batch)`` of this process's next step (pieces None: no data)."""
        state = self._host_state()
        if self._local_done:
            return state, None, None, None
        try:
            pieces, whole = self._next_pieces()
        except StopIteration:
            self._local_done = True
            return state, None, None, None
        return state, pieces, whole, self._pulled_batch

    def _agree(self) -> tuple[Any, Any]:
        """Multi-host: the processes agree on the step (``agreement``); returns ``(state, step)``.

        Iteration ends only when no process has data; a process that ran out
        feeds empty pieces; if piece sizes differ anywhere in the job, every
        process learns every replica's size, so all of them build one program.
        """
        agreement = self._agreement
        if agreement.ended:
            raise StopIteration
        current, self._ahead = (self._ahead or self._pull()), None
        state, pieces, whole, batch = current
        has_next = pieces is not None
        if agreement.looks_ahead and pieces is not None:
            self._ahead = self._pull()  # so the last step also says that the epoch ends
            has_next = self._ahead[1] is not None
        sizes = [_leading(p) for p in pieces] if pieces is not None else None
        step = agreement.exchange(sizes, has_next, batch)
        if not step.exists:
            raise StopIteration
        if pieces is None:
            pieces, whole = self._empty_pieces(), None
        return state, self._group(pieces, whole, step.sizes)

    def _position(self) -> Any:
        return self._ahead[0] if self._ahead is not None else self._host_state()

    def get_next_as_optional(self) -> Optional:
        from tpustrategy._src.execution import pulls

        eager = pulls.active() is None
        if eager:
            self._optional_pull = True
        try:
            return Optional(self.get_next(), True)
        except StopIteration:
            return Optional()
        finally:
            if eager:
                self._optional_pull = False

    def __next__(self) -> Any:
        return self.get_next()

    def __iter__(self) -> Any:
        return self

    def get_state(self) -> dict[str, Any]:
        """A JSON-able position: resuming from it yields the step ``get_next`` would give next."""
        return {"host": self._prefetcher.snapshot(self._position), "done": False}

    def set_state(self, state: dict[str, Any]) -> None:
        self._prefetcher.stop()
        self._ahead = None
        self._set_host_state(state["host"])
        self._local_done = bool(state.get("done", False))
        self._ended_at_partial = False
        if self._agreement is not None:
            self._agreement.restart()

    def close(self) -> None:
        self._prefetcher.stop()

    def __del__(self) -> None:
        try:
            self._prefetcher.stop()
        except Exception:  # interpreter shutdown
            pass


class DistributedIterator(_StepSource, interfaces.DistributedIterator):
    """Iterator over a ``DistributedDataset``: one step of per-replica values per ``get_next``."""

    def __init__(self, dataset: DistributedDataset):
        self._ds = dataset
        self._host = iter(dataset._plan.dataset)
        # An element split over several steps (no batch() with per-pipeline input): the rest of its steps.
        self._pending: list[tuple[list[Any], Any]] = []
        self._element_state: Any = None
        self._taken = 0
        super().__init__(dataset._strategy, dataset._options, coordinate=dataset._plan.num_pipelines > 1)
        self._first_replica = dataset._pipeline_id * dataset._num_local

    @property
    def element_spec(self) -> Any:
        """The dataset's ``element_spec`` (TensorFlow's ``DistributedIterator.element_spec``)."""
        return self._ds.element_spec

    @property
    def dataset(self) -> DistributedDataset:
        """The ``DistributedDataset`` this iterator steps through."""
        return self._ds

    def _host_state(self) -> Any:
        if self._pending:  # in the middle of an element split over several steps
            return {_SPLIT_KEY: {"before": self._element_state, "taken": self._taken}}
        return self._host.get_state()

    def _set_host_state(self, state: Any) -> None:
        self._pending = []
        if isinstance(state, dict) and _SPLIT_KEY in state:
            self._host.set_state(state[_SPLIT_KEY]["before"])
            for _ in range(int(state[_SPLIT_KEY]["taken"])):
                self._next_pieces()
            return
        self._host.set_state(state)

    def _empty_pieces(self) -> list[Any]:
        empty = split.empty_like_spec(self._ds._plan.dataset.element_spec)
        return [empty] * self._ds._num_local

    def _agreement_rule(self) -> tuple[Any, Any]:
        from tpustrategy._src.input import agreement

        ds = self._ds
        policy = self._options.partial_batch
        rule = agreement.rule_for(ds._plan, ds._num_replicas, policy)

        def sizes_of(b: int) -> list[int]:
            return list(rule.full_sizes) if policy == "pad" and rule.full_sizes else split.piece_sizes(b, ds._num_replicas)

        return rule, sizes_of

    def _next_pieces(self) -> tuple[list[Any], Any]:
        if self._pending:
            self._taken += 1
            return self._take(self._pending.pop(0))
        while True:
            before = self._host.get_state()
            element = next(self._host)
            steps = self._ds._steps_of(element)
            if len(steps) == 1:
                self._pulled_batch = _leading(element)  # the global batch this pipeline read
                return steps[0]
            if steps:
                self._pending, self._element_state, self._taken = steps[1:], before, 1
                return self._take(steps[0])

    def _take(self, step: tuple[list[Any], Any]) -> tuple[list[Any], Any]:
        """One step of an element split over several steps: its batch is this step's rows."""
        self._pulled_batch = sum(max(_leading(p[0] if isinstance(p, tuple) else p), 0) for p in step[0])
        return step


class DistributedDataset(interfaces.DistributedDataset):
    """A dataset of global batches split across replicas (``tf.distribute.DistributedDataset``).

    Accepts no further transformations; supports ``iter``, ``for``,
    ``element_spec``, ``cardinality`` and ``reduce``.
    """

    def __init__(self, strategy: Any, dataset: Any, options: Any = None, *,
                 input_pipeline: tuple[int, int] | None = None):
        from tpustrategy._src.data.core.dataset import Dataset

        options = check_options(options)
        if options.experimental_replication_mode is InputReplicationMode.PER_REPLICA:
            raise NotImplementedError(
                "InputReplicationMode.PER_REPLICA is only supported in "
                "`distribute_datasets_from_function`."
            )
        # TensorFlow's experimental_distribute_dataset ignores experimental_place_dataset_on_device
        # (only datasets from a function are placed): no placement check here.
        if not isinstance(dataset, Dataset):
            raise TypeError(
                "experimental_distribute_dataset: `dataset` must be a tpustrategy.data.Dataset. "
                f"Received: {type(dataset).__name__}.\nFix: build it with tpustrategy.data "
                "(e.g. tpsd.Dataset.from_tensor_slices(arrays).batch(global_batch_size))."
            )
        pipeline_id, num_pipelines = input_pipeline or (jax.process_index(), jax.process_count())
        n = strategy.num_replicas_in_sync
        if n % num_pipelines:
            raise ValueError(
                "tf.distribute expects every worker to have the same number of replicas. "
                f"Received {n} replicas over {num_pipelines} input pipelines."
            )
        self._strategy = strategy
        self._options = options
        self._num_replicas = n
        self._num_local = n // num_pipelines
        self._pipeline_id = pipeline_id
        # Batches are placed on the replicas' devices here: a trailing prefetch_to_device is not needed.
        dataset = device_prefetch.without_device_copies(dataset)
        self._plan = autoshard.plan(dataset, num_pipelines, pipeline_id, n)

    # Splitting -----------------------------------------------------------------------------
    def _steps_of(self, element: Any) -> list[tuple[list[Any], Any]]:
        """The steps one element of this pipeline makes: usually one (or none, when dropped).

        Without a ``batch()`` to resize, a pipeline that reads its own data (OFF,
        FILE or HINT sharding over several pipelines) has its elements split as
        TensorFlow's legacy rebatching does: each element into one piece per
        replica of the job, this pipeline's replicas taking ``local`` consecutive
        pieces per step — so one element makes ``num_pipelines`` steps.
        """
        plan, n, local = self._plan, self._num_replicas, self._num_local
        if plan.mode != "local" or plan.global_batch is not None or n == 1 or plan.num_pipelines == 1:
            result = self._pieces_of(element)
            return [] if result is None else [result]
        b = split.batch_size_of(split.leaves_with_paths(element), "experimental_distribute_dataset", n)
        pieces = split.split_element(element, split.piece_sizes(b, n))
        if self._options.partial_batch == "pad":
            static = -(-b // n)
            pieces = [split.pad_piece(p, static) for p in pieces]
        return [(pieces[k * local:(k + 1) * local], None) for k in range(plan.num_pipelines)]

    def _pieces_of(self, element: Any) -> tuple[list[Any], Any] | None:
        plan, n, local = self._plan, self._num_replicas, self._num_local
        api = "experimental_distribute_dataset"
        policy = self._options.partial_batch
        if n == 1 and policy == "ragged":  # one replica takes the element as it is
            return [element], None
        b = split.batch_size_of(split.leaves_with_paths(element), api, n)
        first = self._pipeline_id * local
        if plan.mode == "global":
            full = plan.global_batch is None or b == plan.global_batch
            sizes = split.piece_sizes(b, n)[first:first + local]
            offset = sum(split.piece_sizes(b, n)[:first])
            if offset or sum(sizes) != b:
                element = split.split_element(element, [offset, sum(sizes)])[1]
        else:
            share = split.pipeline_share(plan.global_batch, n, plan.num_pipelines, self._pipeline_id) if plan.global_batch else None
            full = share is None or b == share
            if share is not None and b == share:
                sizes = split.piece_sizes(plan.global_batch, n)[first:first + local]
            else:
                sizes = split.piece_sizes(b, local)
        if not full and policy == "drop":
            return None
        pieces = split.split_element(element, sizes)
        if policy == "pad":
            static = -(-(plan.global_batch or b) // n)
            padded = [split.pad_piece(p, static) for p in pieces]
            return [(p, m) for p, m in padded], None
        whole = element if len(set(sizes)) == 1 and not split.has_sparse(element) else None
        return pieces, whole

    # Public surface ---------------------------------------------------------------------------
    def __iter__(self) -> DistributedIterator:
        _check_not_in_replica()
        from tpustrategy._src.execution import pulls

        iterator = DistributedIterator(self)
        pulls.register_iterator(iterator, self)
        return iterator

    @property
    def element_spec(self) -> Any:
        """Per-replica specs: a ``PerReplica`` of ``TensorSpec`` per leaf (a plain spec with one replica)."""
        from tpustrategy._src.data.core.structure import TensorSpec

        spec = self._plan.dataset.element_spec
        g = self._plan.global_batch
        even = g is not None and self._plan.drop_remainder and g % self._num_replicas == 0
        per = g // self._num_replicas if even else None

        def one(s: Any) -> Any:
            shape = (per,) + tuple(s.shape[1:]) if s.shape else s.shape
            local = TensorSpec(shape, s.dtype)
            if self._options.partial_batch == "pad":
                local = TensorSpec((-(-(g or 0) // self._num_replicas) or None,) + tuple(s.shape[1:]), s.dtype)
            return local if self._num_replicas == 1 else PerReplica([local] * self._num_local)

        out = jax.tree_util.tree_map(one, spec, is_leaf=lambda x: isinstance(x, TensorSpec))
        if self._options.partial_batch == "pad":
            mask = TensorSpec((-(-(g or 0) // self._num_replicas) or None,), np.bool_)
            out = (out, mask if self._num_replicas == 1 else PerReplica([mask] * self._num_local))
        return out

    def cardinality(self) -> int:
        """The source dataset's cardinality (-1 infinite, -2 unknown)."""
        return self._plan.dataset.cardinality()

    def explain_sharding(self) -> str:
        """Which auto-shard policy was applied to this pipeline, where, and why."""
        return self._plan.decision.explain()

    @property
    def auto_shard_decision(self) -> Any:
        return self._plan.decision

    @property
    def shard_mode(self) -> str:
        """``"global"``: every process's pipeline is the whole input; ``"local"``: its own share."""
        return self._plan.mode

    def __repr__(self) -> str:
        return f"<DistributedDataset over {self._num_replicas} replicas: {self._plan.decision.applied}>"
