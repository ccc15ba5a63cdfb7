"""`Dataset.map`: a function applied to every element, optionally in parallel.

``fn`` receives a tuple element unpacked as positional arguments (as in
``tf.data``); a list it returns becomes a tuple. With ``num_parallel_calls``
the elements are mapped in chunks (one hand-off per chunk) and delivered in
input order, by one of two backends:

* worker threads (``parallel.threads``): right when ``fn`` is cheap or
  releases the GIL (I/O, NumPy on big arrays, parsing in C);
* worker processes (``parallel.processes``): for Python/NumPy work, which
  threads cannot run on more than one core. A parallel map starts on threads
  and measures ``fn``'s CPU time per element; at `PROCESS_MIN_ELEM_S` or more
  with `AUTO_PROCESSES_MIN_CPUS` CPUs (and at least 2 workers) it moves the rest of the stream to a pool of
  processes, if ``fn`` can be sent to one (`processes.pickle_task`);
  otherwise it stays on threads and warns once, saying why.
  ``Options().threading.experimental_worker_processes`` = True uses processes
  from the first element, False never.

A parallel map followed by ``batch`` is fused (``map_batch.MapBatchIterator``,
TensorFlow's ``map_and_batch_fusion``) where processes are an option: the
workers map and stack whole batches, so one array per batch crosses back.

Both backends checkpoint the same way: the input's state before the chunk
being consumed plus the offset into it; chunks in flight are recomputed after
a restore. ``deterministic=False`` is accepted and keeps the order too, which
is always a valid order (and keeps checkpoints exact).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator
from tpustrategy._src.data.core.options import AUTOTUNE
from tpustrategy._src.data.core.structure import common_spec, spec_of_element
from tpustrategy._src.data.parallel import processes
from tpustrategy._src.data.parallel.threads import (
    cpu_count,
    resolve_parallelism,
)
from tpustrategy._src.data.transformations.calling import call_fn as call_fn
from tpustrategy._src.data.transformations.calling import call_map_fn as call_map_fn
from tpustrategy._src.data.transformations.dummy_element import dummy_element
from tpustrategy._src.data.transformations.parallel_map import ParallelMapIterator
from tpustrategy._src.data.transformations.rest_after_error import RestAfterError


def check_fn(fn: Any, api: str, arg: str = "map_func") -> None:
    if not callable(fn):
        raise TypeError(
            f"{api}: `{arg}` must be callable; received {type(fn).__name__}: {fn!r}.\n"
            "Fix: pass a function, e.g. lambda x: x * 2."
        )


def check_deterministic(value: Any, api: str) -> None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(
            f"{api}: deterministic must be None or a bool; received {type(value).__name__}: {value!r}."
        )


def trace_spec(fn: Callable[..., Any], spec: Any) -> Any | None:
    """The output spec of ``fn`` found by calling it on placeholders, or None.

    ``fn`` runs twice: on zeros (empty strings) with unknown dimensions of
    size 2, and on ones (3-byte strings) with unknown dimensions of size 3.
    Output dimensions that differ between the two runs are unknown (None); if
    either run fails, or dtypes differ, the spec is left to be read from the
    first real element.
    """
    if spec is None:
        return None
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            first = spec_of_element(call_fn(fn, dummy_element(spec, 2, 0)))
            second = spec_of_element(call_fn(fn, dummy_element(spec, 3, 1)))
    except Exception:
        return None
    return common_spec(first, second)


# The fewest CPUs on which a parallel map moves to worker processes by itself (see _make_iterator).
AUTO_PROCESSES_MIN_CPUS = 4
# The same for ``map(...).batch(...)`` fused. One array per batch crosses (the parent's cost per element
# is 4-8 µs): on 2 CPUs at load ~2, interleave -> map(parse_single_example + decode_raw) -> batch(256)
# of 3 KB records ran at 74,000 records/s in processes against 37,000 on threads and 43,700 on one
# CPU (benchmarks/data_cores_vs_tfdata.py; tf.data: 41,400 / 23,900). Fused processes are chosen from
# 2 CPUs (at load 13-15 on the same 2 cores they measured 0.3-0.7x of one thread: a machine with no
# idle core gains nothing from them; Options().threading.experimental_worker_processes=False opts out).
FUSED_PROCESSES_MIN_CPUS = 2




class MapDataset(Dataset):
    """Applies ``fn`` to every element.

    Attributes:
      fn: the function.
      num_parallel_calls: None (run inline), a positive int or AUTOTUNE.
      deterministic: None, True or False.
    """

    _params = ("fn", "num_parallel_calls", "deterministic")

    def __init__(self, input_dataset: Dataset, fn: Callable[..., Any], num_parallel_calls: int | None, deterministic: bool | None):
        super().__init__((input_dataset,))
        check_fn(fn, "Dataset.map")
        resolve_parallelism(num_parallel_calls, "Dataset.map")
        check_deterministic(deterministic, "Dataset.map")
        self.fn = fn
        self.num_parallel_calls = num_parallel_calls
        self.deterministic = deterministic

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return trace_spec(self.fn, input_spec(self.inputs[0]))

    def _compute_cardinality(self) -> int:
        return self.inputs[0].cardinality()

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        workers = resolve_parallelism(self.num_parallel_calls, "Dataset.map", options=ctx.options)
        if workers is None:
            return _MapIterator(self.inputs[0]._make_iterator(ctx), self.fn)
        spans = self._make_span_iterator(ctx, workers)
        return spans if spans is not None else self._parallel_iterator(ctx, workers)

    def _make_span_iterator(self, ctx: IterContext, workers: int) -> NodeIterator | None:
        """``TFRecordDataset(...).batch(n).map(fn, parallel)`` with reading and mapping in worker processes
        (`sources.record_spans`), where the input is such a batch and processes are an option; else None."""
        make = getattr(self.inputs[0], "_span_map_iterator", None)  # a batch over an uncompressed TFRecord reader
        if make is None or workers < 2:
            return None
        mode = self._process_mode(ctx, workers, FUSED_PROCESSES_MIN_CPUS)
        if mode == "off":
            return None
        return make(ctx, self, workers, mode, lambda: self._parallel_iterator(ctx, workers, may_use_processes=False))

    def _parallel_iterator(self, ctx: IterContext, workers: int, may_use_processes: bool = True) -> NodeIterator:
        """The parallel map on threads, moving to worker processes where the function is costly (if it may)."""
        it = self.inputs[0]._make_iterator(ctx)
        threading_opts = ctx.options.threading
        # Measured on 2 cores, one hand-off per element costs more than the second core gives: 0.75x of
        # one thread for a 65 µs function, 0.6x for batch(256).map(parse_example) of 3 KB records (2-5 ms
        # an element; the records' copies cost more than the parse): element-wise processes are chosen
        # by themselves only from AUTO_PROCESSES_MIN_CPUS CPUs.
        mode = self._process_mode(ctx, workers, AUTO_PROCESSES_MIN_CPUS) if may_use_processes else "off"
        out = ParallelMapIterator(it, self.fn, workers, mode, self._worker_task,
                                  threading_opts.max_intra_op_parallelism, self._warn_threads, self,
                                  tune=self.num_parallel_calls == AUTOTUNE and mode == "off")
        if ctx.options.experimental_warm_start:
            out._start()
        return out

    _tasks: dict[Any, tuple[bytes | None, str]] | None = None
    _warned = False

    def _process_mode(self, ctx: IterContext, workers: int, min_cpus: int) -> str:
        """"on", "auto" or "off": where this map's function runs (the option, else the CPUs and workers);
        always "off" inside a map worker (no pool starts pools)."""
        if processes.in_worker():
            return "off"
        want = ctx.options.threading.experimental_worker_processes
        if want is not None:
            return "on" if want else "off"
        return "auto" if workers >= 2 and cpu_count() >= min_cpus else "off"

    def _make_fused_iterator(self, ctx: IterContext, batch_size: int, drop_remainder: bool,
                             batcher: Callable[[NodeIterator], NodeIterator]) -> NodeIterator | None:
        """``map`` then ``batch`` as one `MapBatchIterator` (workers map and stack whole batches), or None.

        None (the caller builds the unfused pair) for a map without ``num_parallel_calls``, with
        ``map_and_batch_fusion`` off, or where worker processes are not an option.
        """
        if self.num_parallel_calls is None or ctx.options.experimental_optimization.map_and_batch_fusion is False:
            return None
        workers = resolve_parallelism(self.num_parallel_calls, "Dataset.map", options=ctx.options)
        assert workers is not None
        mode = self._process_mode(ctx, workers, FUSED_PROCESSES_MIN_CPUS)
        if mode == "off":
            return None
        from tpustrategy._src.data.transformations.map_batch import MapBatchIterator

        inp = self.inputs[0]
        feed_of = getattr(inp, "_record_feed", None)  # a reader, an interleave of readers
        return MapBatchIterator(inp._make_iterator(ctx), self.fn, batch_size, drop_remainder, workers, mode, self,
                                ctx.options.threading.max_intra_op_parallelism, batcher,
                                feed_of(ctx, batch_size) if feed_of is not None else None)

    def _worker_task(self, batch_size: int | None = None, wrap: Callable[[Any], Any] | None = None) -> bytes | None:
        """``fn`` pickled for worker processes (once per dataset, batch size and wrapper), or None after one warning.

        With ``batch_size`` the task maps and stacks whole batches (`processes.MapBatchTask`); ``wrap``
        wraps the task (`record_spans.SpanMapTask`: the worker reads its input first).
        """
        if self._tasks is None:
            self._tasks = {}
        key = (batch_size, wrap)
        if key not in self._tasks:
            task: Any = functools.partial(call_map_fn, self.fn)
            if batch_size is not None:
                task = processes.MapBatchTask(task, batch_size)
            if wrap is not None:
                task = wrap(task)
            self._tasks[key] = processes.pickle_task(task, self.fn)
        payload, why = self._tasks[key]
        if payload is None:
            self._warn_threads(why)
        return payload

    def _warn_threads(self, why: str) -> None:
        if self._warned:
            return
        self._warned = True
        name = getattr(self.fn, "__qualname__", None) or repr(self.fn)
        warnings.warn(
            f"Dataset.map: the map function {name!r} runs in threads of this process, not in worker "
            f"processes, because {why}. Threads share one interpreter lock: Python/NumPy work in it will not "
            "scale with cores.\nFix: define the function at module level, or as a closure over plain values "
            "(numbers, strings, arrays, containers of them), without JAX calls; or set "
            "Options().threading.experimental_worker_processes = False to choose threads and silence this "
            "warning.", processes.ThreadFallbackWarning, stacklevel=2)


class _MapIterator(RestAfterError, NodeIterator):
    def __init__(self, it: NodeIterator, fn: Callable[..., Any]):
        self._it, self._fn = it, fn

    def __next__(self) -> Any:
        if self._pending is not None:
            self._raise_pending()
        return call_map_fn(self._fn, self._read_one())

    def _next_many(self, n: int) -> list[Any]:
        if self._pending is not None:
            self._raise_pending()
        fn = self._fn
        out = []
        xs = self._read_many(n)
        for k, x in enumerate(xs):
            try:
                out.append(call_map_fn(fn, x))
            except BaseException as e:
                if isinstance(e, Exception):
                    self._keep_rest(xs, k, e, bool(out))
                if not out:
                    raise
                self._pending = e
                break
        return out

    def _skip(self, n: int) -> int:
        if self._pending is None and not self._rest:
            return self._it._skip(n)
        return self._skip_rest(n)

    def get_state(self) -> dict[str, Any]:
        return self._rest_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self._restore_rest(state)

    def close(self) -> None:
        self._it.close()
