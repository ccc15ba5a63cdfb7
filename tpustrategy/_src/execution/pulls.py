"""``next(iterator)`` inside ``tps.function``: batches become program inputs.

While ``tps.function`` traces, every batch its code pulls from a distributed
iterator must be an input of the program (a new batch each call), not a
constant. Pulls are recorded per *source*, named independently of the Python
objects of one trace:

- ``("arg", i)``: the iterator passed as argument leaf ``i`` (a new iterator in
  the same place reuses the program);
- ``("global", id)``: an iterator the function closes over;
- ``("inner", k)``: the k-th iterator the function creates itself
  (``for x in dist_dataset:`` or ``iter(...)`` inside): a fresh iterator over
  the same dataset each call, as in TensorFlow.

At trace time a pull is served from the batches the caller already pulled
(traced inputs); a pull beyond them is made concretely — on a helper thread,
outside the trace, so pipelines that run JAX collectives (multi-host
agreement) work — and the function is traced again with it as an input. Every
later call pulls the same number of batches from each source before dispatch;
different batch shapes, or an end of data at another point, trace again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tpustrategy._src import config
from tpustrategy._src.context import contracts
from tpustrategy._src.errors import OutOfRangeError
from tpustrategy._src.execution import off_trace
from tpustrategy._src.variables import frames

END = "end"


def is_source(x: Any) -> bool:
    """Whether ``x`` is an iterator ``tps.function`` pulls batches from."""
    return contracts.is_pullable(x)


@dataclass
class PullLog:
    """What one trace (or one call) pulled, per source: batch specs, and where data ended."""

    counts: dict[Any, int] = field(default_factory=dict)
    ended: set[Any] = field(default_factory=set)
    order: list[Any] = field(default_factory=list)  # sources in order of first pull

    def add(self, source: Any) -> None:
        if source not in self.counts:
            self.counts[source] = 0
            self.order.append(source)
        self.counts[source] += 1

    def end(self, source: Any) -> None:
        if source not in self.counts:
            self.counts[source] = 0
            self.order.append(source)
        self.ended.add(source)


class Sources:
    """The iterators a ``tps.function`` pulls from, by source name (kept across traces)."""

    def __init__(self) -> None:
        self.inner_datasets: dict[Any, Any] = {}  # ("inner", k) -> dataset
        self.inner_iterators: dict[Any, Any] = {}  # ("inner", k) -> the iterator pulled at trace time
        self.globals: dict[Any, Any] = {}  # ("global", id) -> iterator

    def iterator_for_call(self, source: Any, arg_leaves: list[Any], fresh: dict[Any, Any]) -> Any:
        """The iterator that serves ``source`` in a call (fresh ones for inner sources)."""
        kind = source[0]
        if kind == "arg":
            return arg_leaves[source[1]]
        if kind == "global":
            return self.globals[source]
        if source not in fresh:
            fresh[source] = iter(self.inner_datasets[source])
            _mark_inner(fresh[source])
        return fresh[source]


def _mark_inner(iterator: Any) -> None:
    """An iterator the function makes itself (its ``for`` loop): the input layer's partial-step rule."""
    mark = getattr(iterator, "tps_created_in_function", None)
    if mark is not None:
        mark()


class TracePulls:
    """The pull state of one trace (installed on the cross-replica frame)."""

    def __init__(self, sources: Sources, arg_leaves: list[Any], available: dict[Any, list[Any]],
                 ended_at: dict[Any, int]):
        self.sources = sources
        self.arg_positions = {id(leaf): i for i, leaf in enumerate(arg_leaves) if is_source(leaf)}
        self.available = available  # source -> traced batches, in order
        self.ended_at = ended_at  # source -> number of batches before the known end
        self.log = PullLog()
        self.more: list[tuple[Any, Any]] = []  # (source, concrete batch or END) found in this trace
        self.inner_count = 0
        self.iterator_sources: dict[int, Any] = {}  # id(iterator created in this trace) -> source

    def source_of(self, iterator: Any) -> Any:
        key = id(iterator)
        if key in self.iterator_sources:
            return self.iterator_sources[key]
        if key in self.arg_positions:
            return ("arg", self.arg_positions[key])
        source = ("global", key)
        self.sources.globals[source] = iterator
        return source

    def register_inner(self, iterator: Any, dataset: Any) -> None:
        source = ("inner", self.inner_count)
        self.inner_count += 1
        self.iterator_sources[id(iterator)] = source
        self.sources.inner_datasets[source] = dataset
        self.sources.inner_iterators.setdefault(source, iterator)
        _mark_inner(iterator)

    def pull(self, iterator: Any) -> Any:
        source = self.source_of(iterator)
        position = self.log.counts.get(source, 0)
        if source in self.ended_at and position >= self.ended_at[source]:
            self.log.end(source)
            raise OutOfRangeError("End of sequence")
        batches = self.available.get(source, [])
        if position < len(batches):
            self.log.add(source)
            return batches[position]
        limit = config.MAX_UNROLLED_PULLS
        if position >= limit:
            raise RuntimeError(
                f"tps.function: the traced code pulled more than {limit} batches from one iterator "
                "in a single call. A Python loop inside tps.function is unrolled into one program, so "
                "a loop over a whole (or endless) dataset makes a program that large.\nFix: loop over "
                "the dataset outside the function and call it once per step (or per k steps: "
                "`for _ in range(k): strategy.run(step, (next(it),))` inside), or raise "
                "TPS_MAX_UNROLLED_PULLS."
            )
        concrete = self.sources.inner_iterators.get(source, iterator)
        batch = _pull_outside_trace(concrete)
        if batch is END:
            self.ended_at[source] = position
            self.more.append((source, END))
            self.log.end(source)
            raise OutOfRangeError("End of sequence")
        self.more.append((source, batch))
        self.log.add(source)
        return _placeholder(batch)


def _pull_outside_trace(iterator: Any) -> Any:
    """``iterator.tps_pull()`` on a helper thread: JAX's trace state is per thread."""

    def pull() -> Any:
        try:
            return iterator.tps_pull()
        except StopIteration:
            return END

    return off_trace.call(pull, "tps-pull")


def _placeholder(batch: Any) -> Any:
    """Zeros of a batch's structure: stands in for it until the retrace makes it an input."""
    import jax.numpy as jnp

    from tpustrategy._src.execution import signature
    from tpustrategy._src.execution.signature import wrap_cross_input

    inputs = signature.classify(batch)
    return inputs.rebuild(inputs.arrays,
                          lambda spec, leaf, _: wrap_cross_input(spec, leaf, jnp.zeros(spec.shape, spec.dtype)))


def active() -> TracePulls | None:
    frame = frames.current()
    if frame is None or frame.level != "cross":
        return None
    return getattr(frame, "pulls", None)


def pull(iterator: Any) -> Any:
    """Inside a ``tps.function`` trace: the traced batch; outside: None."""
    state = active()
    return state.pull(iterator) if state is not None else None


def register_iterator(iterator: Any, dataset: Any) -> None:
    """Called by ``iter(distributed_dataset)``: names iterators created inside a trace."""
    state = active()
    if state is not None:
        state.register_inner(iterator, dataset)


def prepull(sources: Sources, log: PullLog, arg_leaves: list[Any]) -> tuple[dict[Any, list[Any]], dict[Any, int], bool]:
    """Pulls one call's batches as a trace recorded them.

    Returns:
      (batches per source, ends found (source -> count), whether everything
      matched the recorded counts and ends).
    """
    fresh: dict[Any, Any] = {}
    batches: dict[Any, list[Any]] = {}
    ends: dict[Any, int] = {}
    matched = True
    for source in log.order:
        iterator = sources.iterator_for_call(source, arg_leaves, fresh)
        got = batches.setdefault(source, [])
        want = log.counts[source] + (1 if source in log.ended else 0)
        for _ in range(want):
            try:
                got.append(iterator.tps_pull())
            except StopIteration:
                ends[source] = len(got)
                break
        if source in log.ended:
            matched &= ends.get(source) == log.counts[source]
        else:
            matched &= len(got) == log.counts[source] and source not in ends
    # Later concrete pulls (in a retrace) continue from these iterators.
    sources.inner_iterators.update(fresh)
    return batches, ends, matched
