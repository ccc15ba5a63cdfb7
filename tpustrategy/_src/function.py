"""``tps.function``: a cross-replica step compiled into one XLA program.

The ``tf.function`` role, built on the execution core: the function is traced
(``execution.trace.CrossView``) once per input signature; inside it
``strategy.run`` (its own ``shard_map``, possibly ragged), ``strategy.reduce``,
variable reads and writes and ``next(iterator)`` of a distributed iterator are
all traced, so a call is one dispatch. A Python loop of k steps inside gives
TPU-style steps-per-execution: k steps per dispatch. Batches pulled from
iterators are inputs of the program (``execution.pulls``); a call pulls the
same number of batches before it dispatches, and batches of another shape (the
partial last batch) or an end of data at another point trace again.

Called while another trace is in progress — inside a replica function
(``strategy.run(tps.function(fn))``), inside another ``tps.function``, or on
the eager path — the function body runs inline, as ``tf.function`` inlines
nested functions.
"""

from __future__ import annotations

import collections
import functools
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from tpustrategy._src import config
from tpustrategy._src.context import stack as context
from tpustrategy._src.execution import host_values, outputs, pulls, signature, trace
from tpustrategy._src.execution.program import Placement, Program, split_flags
from tpustrategy._src.variables import frames

_CACHE_SIZE = 64


@dataclass
class _Entry:
    program: Program
    traced: trace.Traced
    pull_signature: tuple[Any, ...]


def _pull_signature(layout: list[tuple[Any, int]], batches: dict[Any, list[signature.Inputs]],
                    ends: dict[Any, int]) -> tuple[Any, ...]:
    sources = list(dict.fromkeys([s for s, _ in layout] + list(ends)))
    return tuple((s, tuple(b.key for b in batches.get(s, [])), ends.get(s)) for s in sources)


def _in_trace_or_replica() -> bool:
    if frames.current() is not None:
        return True
    entry = context.current_entry()
    return entry is not None and entry.replica_context is not None and not entry.replica_context._is_default


class Function:
    """A compiled cross-replica function (see ``function``)."""

    def __init__(self, fn: Callable[..., Any]):
        self._fn = fn
        self._state = trace.TraceState()
        self._entries: collections.OrderedDict[Any, _Entry] = collections.OrderedDict()
        self._last: dict[Any, _Entry] = {}  # per input key: the entry whose pulls the next call repeats
        # Set once the function used a scalar integer/bool array argument as a Python value
        # (TensorFlow's TPU guide: ``for _ in range(steps)`` with ``steps`` a tensor): such
        # arguments are then static, one trace per value.
        self._static_scalars = False
        # Set when the function uses strategies over different devices: one XLA program spans
        # one device set, so the body then runs as Python (each strategy.run still compiled).
        self._uncompiled = False
        # The replica-axis sharding of the strategy the last program ran on: host-built
        # PerReplica arguments are placed there once and keep that array (no copy per call).
        self._split_sharding: Any = None
        functools.update_wrapper(self, fn)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    @property
    def python_function(self) -> Callable[..., Any]:
        """The wrapped Python function (``tf.function``'s attribute)."""
        return self._fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if config.functions_run_eagerly() or _in_trace_or_replica() or self._uncompiled:
            return self._fn(*args, **kwargs)
        if self._static_scalars:
            args, kwargs = _scalars_as_python((args, kwargs))
        if jax.process_count() > 1:
            host_values.agree_on_shapes((args, kwargs))
        inputs = signature.classify((args, kwargs), self._split_sharding)
        last = self._last.get(inputs.key)
        available: dict[Any, list[signature.Inputs]] = {}
        ends: dict[Any, int] = {}
        if last is not None:
            log = last.traced.pull_log
            raw, ends, _ = pulls.prepull(self._state.sources, log, inputs.leaves) if log else ({}, {}, True)
            available = {s: [signature.classify(b) for b in bs] for s, bs in raw.items()}
            layout = [(s, len(bs)) for s, bs in available.items()]
            entry = self._entries.get((inputs.key, _pull_signature(layout, available, ends)))
            if entry is not None:
                self._entries.move_to_end((inputs.key, entry.pull_signature))
                self._last[inputs.key] = entry
                return self._call(entry, inputs, available)
        try:
            traced = trace.trace(self._fn, inputs, trace.CrossView(), self._state, available, ends)
        except _CONCRETIZATION_ERRORS as e:
            if not self._static_scalars and _has_scalar_arrays((args, kwargs)):
                self._static_scalars = True
                warnings.warn(
                    f"tps.function({_name(self._fn)}): the function uses a scalar integer or bool array "
                    f"argument as a Python value ({type(e).__name__}), e.g. `for _ in range(steps)`. Such "
                    "arguments are now static: the function is traced again for every new value.\nFix: "
                    "pass a Python int (same effect, no warning), or use jax.lax.fori_loop to keep one "
                    "program for every value.",
                    UserWarning,
                    stacklevel=2,
                )
                return self(*args, **kwargs)
            raise _python_value_error(self._fn, e) from e
        pulled, traced.pulled = traced.pulled, {}
        if _spans_several_device_sets(traced.strategies):
            return self._run_uncompiled(traced, pulled, args, kwargs)
        entry = _Entry(self._compile(traced, inputs, pulled), traced,
                       _pull_signature(traced.pull_layout, pulled, _ends_of(traced)))
        if not traced.one_shot:
            self._entries[(inputs.key, entry.pull_signature)] = entry
            if len(self._entries) > _CACHE_SIZE:
                self._entries.popitem(last=False)
            self._last[inputs.key] = entry
        return self._call(entry, inputs, pulled)

    def _run_uncompiled(self, traced: trace.Traced, pulled: dict[Any, Any], args: tuple,
                        kwargs: dict) -> Any:
        names = ", ".join(f"{type(s).__name__} over devices {sorted(d.id for d in s.mesh.devices.flat)}"
                          for s in _distinct_strategies(traced.strategies))
        if any(pulled.values()):
            raise ValueError(
                f"tps.function({_name(self._fn)}): the function uses strategies over different devices "
                f"({names}) and reads from a distributed iterator; one XLA program runs on one set of "
                "devices, so it cannot be compiled, and the batches it pulled cannot be run as Python.\n"
                "Fix: use one strategy per tps.function (call one tps.function per strategy), or a "
                "strategy over all the devices."
            )
        self._uncompiled = True
        warnings.warn(
            f"tps.function({_name(self._fn)}): the function uses strategies over different devices "
            f"({names}); one XLA program runs on one set of devices, so its body now runs as Python "
            "on every call (each strategy.run inside is still one compiled program).\nFix: use one "
            "strategy per tps.function, or one strategy over all the devices.",
            UserWarning,
            stacklevel=3,
        )
        return self._fn(*args, **kwargs)

    def _call(self, entry: _Entry, inputs: signature.Inputs, batches: dict[Any, list[signature.Inputs]]) -> Any:
        extra = []
        for source, count in entry.traced.pull_layout:
            for batch in batches[source][:count]:
                extra.extend(batch.arrays)
        return entry.program(inputs.arrays, extra)

    def _compile(self, traced: trace.Traced, inputs: signature.Inputs,
                 pulled: dict[Any, list[signature.Inputs]]) -> Program:
        closed = traced.closed
        strategy = next((s for s in traced.strategies if not getattr(s, "_is_default", False)), None)
        extra_split = []
        for source, count in traced.pull_layout:
            for batch in pulled.get(source, [])[:count]:
                extra_split.extend(split_flags(batch.specs))
        placement = Placement.of(strategy)
        out_shardings = None
        if placement is not None:
            self._split_sharding = placement.split
            # Cross-replica results live replicated over the whole job (readable on every
            # process), per-replica ones split over the replicas, variables where they live.
            out_shardings = tuple(
                [placement.split if k.kind is outputs.Kind.PER_REPLICA else placement.replicated
                 for k in traced.out_kinds if not k.is_static]
                + [placement.variable_sharding(v) for v in traced.written])
        jitted = jax.jit(lambda *flat: tuple(jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *flat)),
                         out_shardings=out_shardings)
        return Program(jitted, placement, split_flags(inputs.specs), traced.variables,
                       traced.written, traced.out_treedef, traced.out_kinds, 0,
                       f"tps.function({getattr(self._fn, '__qualname__', self._fn)})",
                       extra_split=extra_split or None)


_CONCRETIZATION_ERRORS = (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError,
                          jax.errors.TracerBoolConversionError, jax.errors.TracerArrayConversionError)


def _distinct_strategies(strategies: list[Any]) -> list[Any]:
    return [s for s in dict.fromkeys(strategies) if not getattr(s, "_is_default", False)]


def _spans_several_device_sets(strategies: list[Any]) -> bool:
    return len({frozenset(s.mesh.devices.flat) for s in _distinct_strategies(strategies)}) > 1


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def _is_scalar_array(x: Any) -> bool:
    return (isinstance(x, (jax.Array, np.ndarray, np.generic)) and not isinstance(x, jax.core.Tracer)
            and np.shape(x) == () and (np.issubdtype(x.dtype, np.integer) or x.dtype == np.bool_))


def _has_scalar_arrays(tree: Any) -> bool:
    return any(_is_scalar_array(x) for x in jax.tree_util.tree_leaves(tree))


def _scalars_as_python(tree: Any) -> Any:
    def convert(x: Any) -> Any:
        if not _is_scalar_array(x):
            return x
        return bool(x) if x.dtype == np.bool_ else int(x)

    return jax.tree_util.tree_map(convert, tree)


_DYNAMIC_SHAPE = re.compile(r"The size argument of (\S+) must be statically specified")


def dynamic_shape_error(api: str, error: BaseException) -> ValueError | None:
    """The error for an op whose result shape depends on values (``jnp.argwhere``), or None."""
    found = _DYNAMIC_SHAPE.search(str(error))
    if found is None:
        return None
    op = found.group(1)
    return ValueError(
        f"{api}: {op} (also behind jnp.argwhere, jnp.where(x) with one argument, jnp.unique, boolean "
        "indexing) gives a result whose shape depends on the values, and an XLA program has static "
        f"shapes, so it cannot run inside a compiled step.\nFix: give the size, e.g. {op}(x, "
        "size=n, fill_value=-1), or use a mask (jnp.where(cond, x, 0), x * mask), or compute it "
        "outside tps.function / strategy.run on concrete arrays."
    )


def _python_value_error(fn: Any, error: BaseException) -> Exception:
    found = dynamic_shape_error(f"tps.function({_name(fn)})", error)
    if found is not None:
        return found
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return TypeError(
        f"tps.function({getattr(fn, '__qualname__', fn)}): the function uses an array argument or a computed "
        f"value as a Python value ({type(error).__name__}: {first}). Inside tps.function arrays are traced: "
        "`range(n)`, `int(x)`, `if x > 0:` and NumPy calls on them have no value at trace time.\nFix: pass "
        "loop counts and flags as Python ints/bools (they become part of the signature and retrace when "
        "they change), or use jax.lax.fori_loop / jax.lax.cond / jnp.where on arrays."
    )


def _ends_of(traced: trace.Traced) -> dict[Any, int]:
    log = traced.pull_log
    if log is None:
        return {}
    return {s: log.counts[s] for s in log.ended}


def function(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Compiles a cross-replica step into one XLA program (``tf.function``).

    Args:
      fn: the function; usable as ``@tps.function`` or ``@tps.function(...)``.
      **options: accepted for compatibility (``jit_compile``, ``input_signature``,
        ``reduce_retracing``, ``autograph``); the program is always compiled by XLA.

    Returns:
      A callable with the same signature; each call is one dispatch.

    Example:
      >>> @tps.function
      ... def train(iterator):
      ...     for _ in range(10):          # 10 steps per dispatch
      ...         loss = strategy.run(step, (next(iterator),))
      ...     return strategy.reduce("MEAN", loss, axis=None)
    """
    signature = options.get("input_signature")
    if signature is not None and not isinstance(signature, (list, tuple)):
        raise TypeError(
            f"input_signature must be either a tuple or a list, got {type(signature)}.\n(tps.function: "
            f"Received: input_signature={signature!r:.60}.) Fix: pass a list of specs, e.g. "
            "[jax.ShapeDtypeStruct((None, 4), 'float32')], or leave it out (tps.function traces per "
            "input signature anyway)."
        )
    if fn is None:
        return lambda f: function(f, **options)
    if not callable(fn):
        raise TypeError(
            f"tps.function: `fn` must be a callable. Received: fn={fn!r:.60}.\nFix: decorate the "
            "function itself (@tps.function over a def), or pass the function, not its result."
        )
    return Function(fn)
