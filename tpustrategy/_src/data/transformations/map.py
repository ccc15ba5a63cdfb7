"""`Dataset.map`: a function applied to every element, optionally in parallel.

``fn`` receives a tuple element unpacked as positional arguments (as in
``tf.data``); a list it returns becomes a tuple. With ``num_parallel_calls``
the elements are mapped by worker threads in chunks (one hand-off per chunk,
the chunk sized so that mapping it takes about a millisecond) and delivered
in input order. Threads help when ``fn`` releases the GIL (NumPy, I/O,
parsing in C); ``deterministic=False`` is accepted and keeps the order too,
which is always a valid order.
"""

from __future__ import annotations

import threading
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.string_scalar import StringScalar
from tpustrategy._src.data.core.structure import common_spec, spec_of_element
from tpustrategy._src.data.parallel.threads import (
    ElementError,
    FailedChunk,
    WorkerOwner,
    resolve_parallelism,
    shutdown_workers,
    start_thread,
    take_from_chunk,
)
from tpustrategy._src.data.transformations.dummy_element import dummy_element
from tpustrategy._src.data.transformations.rest_after_error import RestAfterError


def call_fn(fn: Callable[..., Any], element: Any) -> Any:
    """``fn(*element)`` for plain tuples, ``fn(element)`` otherwise (``tf.data`` rule).

    A scalar string argument is passed as a `StringScalar` (``bytes`` that also
    indexes like TensorFlow's 0-d string tensor, ``eg[np.newaxis]``); one
    returned unchanged comes back as plain ``bytes``.
    """
    wrapped = False
    if type(element) is tuple:
        if bytes in map(type, element):
            element = tuple(StringScalar(a) if type(a) is bytes else a for a in element)
            wrapped = True
        out = fn(*element)
    elif type(element) is bytes:
        out = fn(StringScalar(element))
        wrapped = True
    else:
        out = fn(element)
    if type(out) is list:
        out = tuple(out)
    if not wrapped:
        return out
    # Scalars handed in as StringScalar leave as plain bytes (also inside a returned tuple/dict).
    if type(out) is StringScalar:
        return bytes(out)
    if type(out) is tuple:
        return tuple(bytes(v) if type(v) is StringScalar else v for v in out)
    if type(out) is dict:
        return {k: bytes(v) if type(v) is StringScalar else v for k, v in out.items()}
    return out


def call_map_fn(fn: Callable[..., Any], element: Any) -> Any:
    """``call_fn`` for ``Dataset.map``: a function that returns None is an error, not an element."""
    out = call_fn(fn, element)
    if out is None:
        name = getattr(fn, "__qualname__", None) or repr(fn)
        raise TypeError(
            f"Dataset.map: the map function {name!r} returned None; a map function must return the new "
            "element (an array, or a tuple/dict of arrays).\nFix: add the missing `return`, or use "
            "Dataset.filter to drop elements."
        )
    return out


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
        it = self.inputs[0]._make_iterator(ctx)
        workers = resolve_parallelism(self.num_parallel_calls, "Dataset.map", options=ctx.options)
        if workers is None:
            return _MapIterator(it, self.fn)
        out = ParallelMapIterator(it, self.fn, workers)
        if ctx.options.experimental_warm_start:
            out._start()
        return out


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


class _MapShared:
    """State shared by a `ParallelMapIterator` and its workers."""

    def __init__(self, it: NodeIterator, fn: Callable[..., Any], workers: int):
        self.cond = threading.Condition()
        self.input_lock = threading.Lock()
        self.it, self.fn = it, fn
        self.next_id = 0
        self.results: dict[int, tuple[Any, list[Any], BaseException | None]] = {}
        self.inflight = 0
        self.max_inflight = 2 * workers
        self.input_done = False
        self.stop = False
        self.chunk = 1
        self.threads: list[threading.Thread] = []


def _map_worker(sh: _MapShared) -> None:
    while True:
        with sh.cond:
            while not sh.stop and not sh.input_done and sh.inflight >= sh.max_inflight:
                sh.cond.wait()
            if sh.stop or sh.input_done:
                return
            sh.inflight += 1
        with sh.input_lock:
            if sh.stop or sh.input_done:
                with sh.cond:
                    sh.inflight -= 1
                    sh.cond.notify_all()
                return
            cid = sh.next_id
            sh.next_id += 1
            state = None
            try:
                state = sh.it.get_state()
                elems = sh.it._next_many(sh.chunk)
            except Exception as e:  # an input element's error, delivered in its place
                with sh.cond:
                    sh.results[cid] = (state, FailedChunk([ElementError(e)]), None)
                    sh.cond.notify_all()
                continue
            except BaseException as e:
                with sh.cond:
                    sh.results[cid] = (None, [], e)
                    sh.input_done = True
                    sh.cond.notify_all()
                return
            if not elems:
                sh.input_done = True
        outs: list[Any] = []
        err: BaseException | None = None
        fn = sh.fn
        t0 = time.perf_counter()
        failed = False
        for x in elems:
            try:
                outs.append(call_map_fn(fn, x))
            except Exception as e:  # fails only this element (TensorFlow's rule)
                outs.append(ElementError(e))
                failed = True
            except BaseException as e:
                err = e
                break
        if failed:
            outs = FailedChunk(outs)
        per_elem = (time.perf_counter() - t0) / max(1, len(outs))
        sh.chunk = int(min(1024, max(1, 0.001 / max(per_elem, 1e-7))))
        with sh.cond:
            sh.results[cid] = (state, outs, err)
            if err is not None or not elems:
                sh.input_done = True
            sh.cond.notify_all()
        if err is not None or not elems:
            return


class ParallelMapIterator(WorkerOwner, NodeIterator):
    """Maps chunks of elements in ``workers`` threads, delivering them in order."""

    def __init__(self, it: NodeIterator, fn: Callable[..., Any], workers: int):
        self._it, self._fn, self._workers = it, fn, workers
        self._sh: _MapShared | None = None
        self._finalizer: Any = None
        self._take_id = 0
        self._chunk: list[Any] = []
        self._pos = 0
        self._chunk_state: Any = None
        self._done = False

    def _start(self) -> _MapShared:
        sh = _MapShared(self._it, self._fn, self._workers)
        self._chunk_state = self._it.get_state()
        self._take_id = 0
        for i in range(self._workers):
            sh.threads.append(start_thread(_map_worker, (sh,), f"tpsd-map-{i}"))
        self._sh = sh
        self._finalizer = weakref.finalize(self, shutdown_workers, sh)
        return sh

    def _fill(self) -> bool:
        if self._done:
            return False
        sh = self._sh or self._start()
        with sh.cond:
            while self._take_id not in sh.results and not sh.stop:
                sh.cond.wait()
            if sh.stop:
                self._done = True
                return False
            state, outs, err = sh.results.pop(self._take_id)
            self._take_id += 1
            sh.inflight -= 1
            sh.cond.notify_all()
        if err is not None:
            if outs:
                self._pending = err
            else:
                self._done = True
                raise err
        elif not outs:
            self._done = True
            return False
        if state is not None:
            self._chunk_state = state
        self._chunk, self._pos = outs, 0
        self._failed = type(outs) is FailedChunk
        return True

    _failed = False
    _pending: BaseException | None = None

    def _raise_pending(self) -> None:
        err, self._pending = self._pending, None
        self._done = True
        raise err  # type: ignore[misc]

    def __next__(self) -> Any:
        if self._pos >= len(self._chunk):
            if self._pending is not None:
                self._raise_pending()
            if not self._fill():
                raise StopIteration
        x = self._chunk[self._pos]
        self._pos += 1
        if self._failed and type(x) is ElementError:
            raise x.error
        return x

    def _next_many(self, n: int) -> list[Any]:
        if self._pos >= len(self._chunk):
            if self._pending is not None:
                self._raise_pending()
            if not self._fill():
                return []
        out, self._pos, err = take_from_chunk(self._chunk, self._pos, n, self._failed)
        if err is not None:
            raise err
        return out

    def get_state(self) -> dict[str, Any]:
        if self._sh is None and self._chunk_state is None:
            return {"input": self._it.get_state(), "skip": 0}
        return {"input": self._chunk_state, "skip": self._pos}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "skip"), "parallel map")
        self._stop()
        self._it.set_state(state["input"])
        self._it._skip(int(state["skip"]))
        self._chunk, self._pos, self._chunk_state = [], 0, None
        self._done, self._pending = False, None

