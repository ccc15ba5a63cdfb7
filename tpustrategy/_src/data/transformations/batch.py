"""`Dataset.batch`: stacks consecutive elements into batches.

The batch node pulls ``batch_size`` elements at once through the bulk path
(`pull_batch`), so a reader or a range hands over a whole batch worth of
elements in a few calls. The last batch is short unless ``drop_remainder``.
With ``num_parallel_calls`` batches are assembled ahead in a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.args import as_bool, int_or_none
from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state, pull_batch
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
from tpustrategy._src.data.core.structure import batch_spec
from tpustrategy._src.data.parallel.threads import BackgroundIterator, resolve_parallelism
from tpustrategy._src.data.transformations.map import MapDataset, check_deterministic


def check_batch_size(batch_size: Any, api: str) -> int:
    """``batch_size`` (a Python int, NumPy integer or 0-d integer array) as a positive int."""
    size = int_or_none(batch_size)
    if size is None:
        raise TypeError(
            f"{api}: batch_size must be an int; received {type(batch_size).__name__}: {batch_size!r}.\n"
            "Fix: pass a positive int, e.g. batch(32)."
        )
    if size <= 0:
        raise ValueError(
            f"{api}: batch_size must be greater than zero; received batch_size={size}.\n"
            "Fix: pass a positive int, e.g. batch(32)."
        )
    return size


def check_bool(value: Any, api: str, arg: str) -> bool:
    """A Python or NumPy bool (TensorFlow programs pass ``tf.constant(True)``) as a bool."""
    return as_bool(value, api, arg)


def batched_cardinality(n: int, batch_size: int, drop_remainder: bool) -> int:
    if n in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY):
        return n
    return n // batch_size + (0 if n % batch_size == 0 or drop_remainder else 1)


class BatchDataset(Dataset):
    """Batches of ``batch_size`` consecutive elements.

    Attributes:
      batch_size: elements per batch.
      drop_remainder: whether a short last batch is dropped.
      num_parallel_calls: None, a positive int or AUTOTUNE (batches built ahead).
      deterministic: accepted for API compatibility (order is always kept).
    """

    _params = ("batch_size", "drop_remainder", "num_parallel_calls", "deterministic")

    def __init__(
        self,
        input_dataset: Dataset,
        batch_size: int,
        drop_remainder: bool = False,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
    ):
        super().__init__((input_dataset,))
        self.batch_size = check_batch_size(batch_size, "Dataset.batch")
        self.drop_remainder = check_bool(drop_remainder, "Dataset.batch", "drop_remainder")
        resolve_parallelism(num_parallel_calls, "Dataset.batch")
        check_deterministic(deterministic, "Dataset.batch")
        self.num_parallel_calls = num_parallel_calls
        self.deterministic = deterministic

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        spec = input_spec(self.inputs[0])
        if spec is None:
            return None
        size = self.batch_size if self.drop_remainder else None
        return batch_spec(spec, size)

    def _compute_cardinality(self) -> int:
        return batched_cardinality(self.inputs[0].cardinality(), self.batch_size, self.drop_remainder)

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        inp = self.inputs[0]
        fused = (inp._make_fused_iterator(ctx, self.batch_size, self.drop_remainder, self._batcher)
                 if isinstance(inp, MapDataset) else None)
        it: NodeIterator = fused or BatchIterator(inp._make_iterator(ctx), self.batch_size, self.drop_remainder)
        workers = resolve_parallelism(self.num_parallel_calls, "Dataset.batch")
        if workers is not None:
            it = BackgroundIterator(it, max(2, workers), name="tpsd-batch")
        return it

    def _span_map_iterator(self, ctx: IterContext, map_node: Any, workers: int, mode: str,
                           unfused: Callable[[], NodeIterator]) -> NodeIterator | None:
        """A parallel map over this batch with reading in worker processes, where the input reader
        describes batches as byte ranges (`TFRecordDataset`); else None."""
        make = getattr(self.inputs[0], "_batch_span_map_iterator", None)
        if make is None or self.num_parallel_calls is not None:
            return None
        return make(ctx, self.batch_size, self.drop_remainder, map_node, workers, mode, unfused)

    def _batcher(self, it: NodeIterator) -> NodeIterator:
        """This batch over ``it`` (the unfused pipeline a fused map + batch falls back to)."""
        return BatchIterator(it, self.batch_size, self.drop_remainder)


class BatchIterator(NodeIterator):
    def __init__(self, it: NodeIterator, batch_size: int, drop_remainder: bool):
        self._it, self._n, self._drop = it, batch_size, drop_remainder
        self._done = False
        self._pending: Exception | None = None

    def _next_many(self, n: int) -> list[Any]:
        """Up to ``n`` batches; an input error after some of them comes at the next call, so that
        the batches before it are delivered (a parallel map or prefetch reads batches in chunks)."""
        out: list[Any] = []
        try:
            for _ in range(n):
                out.append(self.__next__())
        except StopIteration:
            pass
        except Exception as e:
            if not out:
                raise
            self._pending = e
        return out

    def __next__(self) -> Any:
        if self._pending is not None:
            err, self._pending = self._pending, None
            raise err
        if self._done:
            raise StopIteration
        got = pull_batch(self._it, self._n, "Dataset.batch")
        if got is None or (self._drop and got[0] < self._n):
            self._done = True
            raise StopIteration
        if got[0] < self._n:
            self._done = True
        return got[1]

    def get_state(self) -> dict[str, Any]:
        return {"input": self._it.get_state(), "done": self._done}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "done"), "batch")
        self._it.set_state(state["input"])
        self._done = bool(state["done"])
        self._pending = None

    def close(self) -> None:
        self._it.close()
