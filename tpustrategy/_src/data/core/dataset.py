"""`Dataset`: a lazy graph of input transformations (``tf.data.Dataset``).

A dataset is a node that knows its upstream datasets (``inputs``) and its
parameters; nothing is read or computed until it is iterated. The chaining
methods here are thin: each builds a node from the module of that
transformation (one module per transformation). The graph can be walked
(`Dataset._graph_nodes`) and rebuilt with new inputs (`Dataset.with_inputs`),
which is how the auto-shard rewrite inserts a ``shard`` above the file names
of a reader.
"""

from __future__ import annotations

import abc
import copy
import itertools
import os
from collections.abc import Callable
from typing import Any, ClassVar

from tpustrategy._src.context import extensions
from tpustrategy._src.data.core.binding import bound_now
from tpustrategy._src.data.core.dataset_more import MoreTransformations, renamed_arg
from tpustrategy._src.data.core.dataset_sources import _SourceMethods
from tpustrategy._src.data.core.iterator import DatasetIterator, IterContext, NodeIterator
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Options
from tpustrategy._src.data.core.structure import spec_of_element


class Dataset(MoreTransformations, _SourceMethods, abc.ABC):
    """A lazy, re-iterable stream of elements (nests of NumPy arrays and ``bytes``).

    Attributes:
      inputs: the upstream datasets of this node (empty for sources).

    Example:
      >>> ds = Dataset.range(10).map(lambda x: x * 2).batch(4)
      >>> [b.tolist() for b in ds]
      [[0, 2, 4, 6], [8, 10, 12, 14], [16, 18]]
    """

    is_reader: ClassVar[bool] = False
    # Names of the constructor parameters kept as attributes (see `_replace`).
    _params: ClassVar[tuple[str, ...]] = ()

    def __init__(self, inputs: tuple[Dataset, ...] = ()):
        for i, inp in enumerate(inputs):
            if not isinstance(inp, Dataset):
                raise TypeError(
                    f"{type(self).__name__}: input {i} must be a Dataset; received "
                    f"{type(inp).__name__}: {inp!r}."
                )
        self._inputs = tuple(inputs)
        self._spec_cache: list[Any] = []
        self._iterations = itertools.count()
        extensions.dataset_extensions()  # Keras, when imported, learns to take our datasets

    # ------------------------------------------------------------------ graph

    @property
    def inputs(self) -> tuple[Dataset, ...]:
        """The upstream datasets of this node."""
        return self._inputs

    def with_inputs(self, *new_inputs: Dataset) -> Dataset:
        """A shallow copy of this node reading from ``new_inputs`` instead."""
        if len(new_inputs) != len(self._inputs):
            raise ValueError(
                f"{type(self).__name__}.with_inputs: expected {len(self._inputs)} inputs; "
                f"received {len(new_inputs)}."
            )
        new = copy.copy(self)
        Dataset.__init__(new, tuple(new_inputs))
        new._reset()
        return new

    def _replace(self, **params: Any) -> Dataset:
        """A shallow copy with some parameters replaced (e.g. ``batch_size``)."""
        unknown = sorted(set(params) - set(self._params))
        if unknown:
            raise ValueError(
                f"{type(self).__name__}._replace: unknown parameters {unknown}; "
                f"valid: {list(self._params)}."
            )
        new = copy.copy(self)
        Dataset.__init__(new, self._inputs)
        for k, v in params.items():
            setattr(new, k, v)
        new._reset()
        return new

    def _reset(self) -> None:  # a hook: nothing to drop unless a subclass caches
        """Drops per-object caches after a copy (subclasses extend)."""
        return None

    def _graph_nodes(self) -> list[Dataset]:
        """Every node reachable from this one through ``inputs``, outputs first."""
        from tpustrategy._src.data.core.graph import walk

        return list(walk(self))

    # ------------------------------------------------------------ to override

    @abc.abstractmethod
    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        """A fresh iterator over this node's elements (every node implements it)."""

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any | None:
        """The element spec from the inputs' specs (``input_spec(d)``), or None if unknown."""
        return None

    def _compute_cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    # ------------------------------------------------------------- properties

    def _static_spec(self) -> Any | None:
        """The element spec if it is known without reading any data, else None."""
        if not self._spec_cache:
            self._spec_cache.append(self._compute_spec(Dataset._static_spec))
        return self._spec_cache[0]

    @property
    def element_spec(self) -> Any:
        """A nest of `TensorSpec` describing one element.

        Computed from the graph where possible. Where a spec cannot be known
        without data (a ``from_generator`` without a signature, a ``map``
        function that fails on placeholders or gives value-dependent shapes),
        the first element of that node is read and described, and the nodes
        downstream derive their specs from it.
        """
        spec = self._static_spec()
        if spec is not None:
            return spec
        if len(self._spec_cache) > 1:
            return self._spec_cache[1]
        spec = self._compute_spec(lambda d: d.element_spec)
        if spec is None:
            spec = self._peek_spec()
        self._spec_cache.append(spec)
        return spec

    def _peek_spec(self) -> Any:
        it = self._make_iterator(IterContext(self.options(), (0,)))
        try:
            first = next(it)
        except StopIteration:
            raise ValueError(
                f"element_spec: the structure of this {type(self).__name__} dataset could not "
                "be inferred without data and the dataset is empty.\n"
                "Fix: give from_generator an output_signature, or make map functions accept "
                "placeholder zeros."
            ) from None
        finally:
            it.close()
        return spec_of_element(first)

    def cardinality(self) -> int:
        """The number of elements, `INFINITE_CARDINALITY` (-1) or `UNKNOWN_CARDINALITY` (-2)."""
        return self._compute_cardinality()

    def __len__(self) -> int:
        n = self.cardinality()
        if n == INFINITE_CARDINALITY:
            raise TypeError(
                "The dataset is infinite.\nFix: use cardinality() (which returns "
                "INFINITE_CARDINALITY) or take(n) before calling len()."
            )
        if n == UNKNOWN_CARDINALITY:
            raise TypeError(
                "The dataset length is unknown.\nFix: use cardinality(), or count the "
                "elements by iterating (e.g. sum(1 for _ in ds))."
            )
        return n

    def __bool__(self) -> bool:
        return True

    def options(self) -> Options:
        """The merged options of the whole pipeline (downstream settings win)."""
        opts = Options()
        for inp in self._inputs:
            opts = opts.merge(inp.options())
        return opts

    # -------------------------------------------------------------- iteration

    def __iter__(self) -> DatasetIterator:
        return DatasetIterator(self, next(self._iterations))

    def as_numpy_iterator(self) -> DatasetIterator:
        """An iterator of NumPy elements (the same as ``iter(ds)`` here)."""
        return iter(self)

    def __repr__(self) -> str:
        # Only a spec already computed: computing one may call user functions.
        spec = next((s for s in self._spec_cache if s is not None), None)
        return f"<{type(self).__name__}>" if spec is None else f"<{type(self).__name__} element_spec={spec}>"

    # -------------------------------------------------------------- sources

    @staticmethod
    def range(*args: int, dtype: Any = None, output_type: Any = None, **bounds: int) -> Dataset:
        """``range(stop)``, ``range(start, stop[, step])`` of int64 scalars.

        ``start``, ``stop`` and ``step`` may also be passed by keyword;
        ``output_type`` (TensorFlow's name) or ``dtype`` picks another integer dtype.
        """
        from tpustrategy._src.data.sources.range_dataset import RangeDataset

        if bounds:
            unknown = sorted(set(bounds) - {"start", "stop", "step"})
            if unknown:
                raise TypeError(f"Dataset.range: unexpected keyword arguments {unknown}.")
            names = ("stop",) if len(args) == 1 and "stop" not in bounds else ("start", "stop", "step")
            full = {"start": 0, "step": 1, **dict(zip(names, args)), **bounds}
            if "stop" not in full:
                raise TypeError("Dataset.range: missing stop; e.g. Dataset.range(10) or Dataset.range(2, 10).")
            args = (full["start"], full["stop"], full["step"])
        return RangeDataset(*args, dtype=output_type if dtype is None else dtype)

    @staticmethod
    def from_tensors(element: Any) -> Dataset:
        """A dataset of exactly one element."""
        from tpustrategy._src.data.sources.from_tensors import TensorDataset

        return TensorDataset(element)

    @staticmethod
    def from_tensor_slices(tensors: Any) -> Dataset:
        """One element per row of the leading dimension of ``tensors``."""
        from tpustrategy._src.data.sources.from_tensors import TensorSliceDataset

        return TensorSliceDataset(tensors)

    @staticmethod
    def from_generator(
        generator: Callable[..., Any],
        output_types: Any = None,
        output_shapes: Any = None,
        args: tuple[Any, ...] | None = None,
        output_signature: Any = None,
    ) -> Dataset:
        """Elements yielded by ``generator(*args)`` (called once per iteration)."""
        from tpustrategy._src.data.sources.from_generator import GeneratorDataset

        return GeneratorDataset(generator, output_types, output_shapes, args, output_signature)

    @staticmethod
    def list_files(
        file_pattern: str | os.PathLike | list[Any], shuffle: bool | None = None, seed: int | None = None
    ) -> Dataset:
        """File names matching glob pattern(s), sorted, shuffled unless ``shuffle=False``."""
        from tpustrategy._src.data.sources.list_files import list_files

        return list_files(file_pattern, shuffle=shuffle, seed=seed)

    @staticmethod
    def zip(*datasets: Any) -> Dataset:
        """Elements of several datasets side by side (a tuple or dict of datasets)."""
        from tpustrategy._src.data.transformations.zip import ZipDataset

        return ZipDataset(datasets[0] if len(datasets) == 1 else datasets)

    # ------------------------------------------------------- transformations

    def map(
        self,
        map_func: Callable[..., Any] | None = None,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
        name: str | None = None,
        *,
        fn: Callable[..., Any] | None = None,
    ) -> Dataset:
        """``map_func(element)`` (``map_func(*element)`` for tuples) for every element.

        ``fn=`` is the older keyword for ``map_func``; ``name`` is accepted (TensorFlow's op name).
        """
        from tpustrategy._src.data.transformations.map import MapDataset

        return MapDataset(self, bound_now(renamed_arg("Dataset.map", "map_func", map_func, "fn", fn)),
                          num_parallel_calls, deterministic)

    def batch(
        self,
        batch_size: int,
        drop_remainder: bool = False,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
    ) -> Dataset:
        """Stacks ``batch_size`` consecutive elements (the last batch may be short)."""
        from tpustrategy._src.data.transformations.batch import BatchDataset

        return BatchDataset(self, batch_size, drop_remainder, num_parallel_calls, deterministic)

    def padded_batch(
        self,
        batch_size: int,
        padded_shapes: Any = None,
        padding_values: Any = None,
        drop_remainder: bool = False,
    ) -> Dataset:
        """Like `batch`, padding each component to ``padded_shapes`` (default: the batch max)."""
        from tpustrategy._src.data.transformations.padded_batch import PaddedBatchDataset

        return PaddedBatchDataset(self, batch_size, padded_shapes, padding_values, drop_remainder)

    def unbatch(self) -> Dataset:
        """Splits every element along its leading dimension."""
        from tpustrategy._src.data.transformations.unbatch import UnbatchDataset

        return UnbatchDataset(self)

    def rebatch(self, batch_size: int, drop_remainder: bool = False) -> Dataset:
        """``unbatch().batch(batch_size, drop_remainder)`` (batches may cross input batches)."""
        return self.unbatch().batch(batch_size, drop_remainder)

    def shard(self, num_shards: int, index: int) -> Dataset:
        """Elements ``index, index + num_shards, ...``."""
        from tpustrategy._src.data.transformations.shard import ShardDataset

        return ShardDataset(self, num_shards, index)

    def repeat(self, count: int | None = None) -> Dataset:
        """The dataset ``count`` times (forever when None or -1)."""
        from tpustrategy._src.data.transformations.repeat import RepeatDataset

        return RepeatDataset(self, count)

    def shuffle(self, buffer_size: int, seed: int | None = None, reshuffle_each_iteration: bool = True) -> Dataset:
        """Samples uniformly from a buffer of ``buffer_size`` upcoming elements."""
        from tpustrategy._src.data.transformations.shuffle import ShuffleDataset

        return ShuffleDataset(self, buffer_size, seed, reshuffle_each_iteration)

    def take(self, count: int) -> Dataset:
        """The first ``count`` elements (all when -1)."""
        from tpustrategy._src.data.transformations.take import TakeDataset

        return TakeDataset(self, count)

    def skip(self, count: int) -> Dataset:
        """All but the first ``count`` elements (none when -1)."""
        from tpustrategy._src.data.transformations.skip import SkipDataset

        return SkipDataset(self, count)

    def filter(self, predicate: Callable[..., Any], name: str | None = None) -> Dataset:
        """The elements for which ``predicate`` is true."""
        from tpustrategy._src.data.transformations.filter import FilterDataset

        return FilterDataset(self, bound_now(predicate))

    def flat_map(
        self, map_func: Callable[..., Dataset] | None = None, name: str | None = None, *, fn: Callable[..., Dataset] | None = None
    ) -> Dataset:
        """Concatenates the datasets ``map_func(element)`` (``fn=``: the older keyword)."""
        from tpustrategy._src.data.transformations.flat_map import FlatMapDataset

        return FlatMapDataset(self, bound_now(renamed_arg("Dataset.flat_map", "map_func", map_func, "fn", fn)))

    def interleave(
        self,
        map_func: Callable[..., Dataset] | None = None,
        cycle_length: int | None = None,
        block_length: int | None = None,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
        name: str | None = None,
        *,
        fn: Callable[..., Dataset] | None = None,
    ) -> Dataset:
        """Cycles over ``cycle_length`` datasets ``map_func(element)``, ``block_length`` at a time.

        ``fn=`` is the older keyword for ``map_func``.
        """
        from tpustrategy._src.data.transformations.interleave import InterleaveDataset

        func = renamed_arg("Dataset.interleave", "map_func", map_func, "fn", fn)
        return InterleaveDataset(self, bound_now(func), cycle_length, block_length, num_parallel_calls, deterministic)

    def prefetch(self, buffer_size: int) -> Dataset:
        """Produces up to ``buffer_size`` elements ahead in a background thread."""
        from tpustrategy._src.data.transformations.prefetch import PrefetchDataset

        return PrefetchDataset(self, buffer_size)

    def cache(self, filename: str = "") -> Dataset:
        """Keeps the elements of the first complete pass and replays them afterwards."""
        from tpustrategy._src.data.transformations.cache import CacheDataset

        return CacheDataset(self, filename)

    def concatenate(self, dataset: Dataset) -> Dataset:
        """This dataset's elements followed by ``dataset``'s."""
        from tpustrategy._src.data.transformations.concatenate import ConcatenateDataset

        return ConcatenateDataset(self, dataset)

    def enumerate(self, start: int = 0) -> Dataset:
        """``(index, element)`` pairs, the index an int64 counting from ``start``."""
        from tpustrategy._src.data.sources.range_dataset import RangeDataset
        from tpustrategy._src.data.transformations.zip import ZipDataset

        return ZipDataset((RangeDataset(start, 2**63 - 1), self))

    def with_options(self, options: Options) -> Dataset:
        """This dataset with ``options`` merged over the pipeline's options."""
        from tpustrategy._src.data.transformations.options_dataset import OptionsDataset

        return OptionsDataset(self, options)

    def apply(self, transformation_func: Callable[[Dataset], Dataset]) -> Dataset:
        """``transformation_func(self)``, checked to return a Dataset."""
        out = transformation_func(self)
        if not isinstance(out, Dataset):
            raise TypeError(
                f"Dataset.apply: transformation_func must return a Dataset; received "
                f"{type(out).__name__}."
            )
        return out
