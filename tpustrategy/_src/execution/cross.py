"""``tps.function``'s path: a cross-replica step traced and compiled into one XLA program.

``CrossFunction`` is everything ``tps.function`` does on a call (``function.Function``
only validates and forwards): the function is traced (``trace.CrossView``) once per
input signature; inside it ``strategy.run`` (its own ``shard_map``, possibly ragged),
``strategy.reduce``, variable reads and writes and ``next(iterator)`` of a distributed
iterator are all traced, so a call is one dispatch. Batches pulled from iterators are
inputs of the program (``pulls``); a call pulls the same number of batches before it
dispatches, and batches of another shape (the partial last batch) or an end of data at
another point trace again. A call whose key (``leaves.call_key``) has a program that
pulls nothing goes straight to it.

Fallbacks (``entry.cross_fallback``), each warned once: a scalar integer/bool array
argument used as a Python value makes such arguments static; a function that uses
strategies over different device sets runs its body as Python.
"""

from __future__ import annotations

import collections
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from tpustrategy._src.context import contracts
from tpustrategy._src.execution import entry, host_values, outputs, pulls, signature, trace
from tpustrategy._src.execution.entry import name_of
from tpustrategy._src.execution.program import Placement, Program, donatable_inputs, split_flags
from tpustrategy._src.execution.tracebacks import user_stacklevel

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


class CrossFunction:
    """The compiled path of one ``tps.function`` (see ``function.function``)."""

    def __init__(self, fn: Callable[..., Any]):
        self._fn = fn
        # ``Function.__call__`` repeats the last call that found a program through this cache's
        # last guard (``FastCache.call`` inline; it checked it is outside every trace); only
        # ``call``'s lookups make those hits.
        self.fast_cache = entry.FastCache(2 * _CACHE_SIZE)
        # Fixed once a program was built (the backend is started): the fast path is one process's.
        self._one_process = False
        self._state = trace.TraceState()
        self._entries: collections.OrderedDict[Any, _Entry] = collections.OrderedDict()
        self._last: dict[Any, _Entry] = {}  # per input key: the entry whose pulls the next call repeats
        # Set once the function used a scalar integer/bool array argument as a Python value
        # (TensorFlow's TPU guide: ``for _ in range(steps)`` with ``steps`` a tensor): such
        # arguments are then static, one trace per value.
        self._static_scalars = False
        # Set when the function uses strategies over different devices: one XLA program spans
        # one device set, so the body then runs as Python (each strategy.run still compiled).
        # A plain attribute, read on every call by ``Function.__call__``.
        self.uncompiled = False
        # The replica-axis sharding of the strategy the last program ran on: host-built
        # PerReplica arguments are placed there once and keep that array (no copy per call).
        self._split_sharding: Any = None

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One call (outside every trace, functions not forced eager, body compiled); a method,
        not ``__call__``, since calling an instance costs a slot lookup more on every call."""
        key = None
        if self._one_process and not self._static_scalars:
            hit = self.fast_cache.lookup(self, args, kwargs, self._split_sharding)
            if hit is not None:
                if hit[0] is not None:
                    return hit[0].fast(hit[1])
                key = hit[2]
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
            found = self._entries.get((inputs.key, _pull_signature(layout, available, ends)))
            if found is not None:
                self._entries.move_to_end((inputs.key, found.pull_signature))
                if key is not None and _pulls_nothing(found):
                    self.fast_cache.put(self, key, found.program)
                self._last[inputs.key] = found
                return self._call(found, inputs, available)
        try:
            traced = trace.trace(self._fn, inputs, trace.CrossView(), self._state, available, ends)
        except entry.CONCRETIZATION_ERRORS as e:
            decision = entry.cross_fallback(
                self._fn, e, not self._static_scalars and _has_scalar_arrays((args, kwargs)))
            if decision.action is entry.Action.RAISE:
                raise decision.error from decision.cause  # type: ignore[misc]
            self._static_scalars = True
            self.fast_cache.forget(self)  # scalar arguments are static now: no call is found by its key
            warnings.warn(
                f"tps.function({name_of(self._fn)}): the function uses a scalar integer or bool array "
                f"argument as a Python value ({decision.reason}), e.g. `for _ in range(steps)`. Such "
                "arguments are now static: the function is traced again for every new value.\nFix: "
                "pass a Python int (same effect, no warning), or use jax.lax.fori_loop to keep one "
                "program for every value.",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
            return self.call(args, kwargs)
        pulled, traced.pulled = traced.pulled, {}
        if _spans_several_device_sets(traced.strategies):
            return self._run_uncompiled(traced, pulled, args, kwargs)
        made = _Entry(self._compile(traced, inputs, pulled), traced,
                      _pull_signature(traced.pull_layout, pulled, _ends_of(traced)))
        if not traced.one_shot:
            self._entries[(inputs.key, made.pull_signature)] = made
            if len(self._entries) > _CACHE_SIZE:
                self._entries.popitem(last=False)
            self._last[inputs.key] = made
            if key is not None and _pulls_nothing(made):
                self.fast_cache.put(self, key, made.program)
        return self._call(made, inputs, pulled)

    def _run_uncompiled(self, traced: trace.Traced, pulled: dict[Any, Any], args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> Any:
        names = ", ".join(f"{type(s).__name__} over devices {sorted(d.id for d in s.mesh.devices.flat)}"
                          for s in _distinct_strategies(traced.strategies))
        if any(pulled.values()):
            raise ValueError(
                f"tps.function({name_of(self._fn)}): the function uses strategies over different devices "
                f"({names}) and reads from a distributed iterator; one XLA program runs on one set of "
                "devices, so it cannot be compiled, and the batches it pulled cannot be run as Python.\n"
                "Fix: use one strategy per tps.function (call one tps.function per strategy), or a "
                "strategy over all the devices."
            )
        self.uncompiled = True
        warnings.warn(
            f"tps.function({name_of(self._fn)}): the function uses strategies over different devices "
            f"({names}); one XLA program runs on one set of devices, so its body now runs as Python "
            "on every call (each strategy.run inside is still one compiled program).\nFix: use one "
            "strategy per tps.function, or one strategy over all the devices.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        try:
            return self._fn(*args, **kwargs)
        except ValueError as e:
            if "incompatible devices" not in str(e):
                raise
            # TensorFlow copies a value to the other's device; a JAX array stays on its devices.
            raise ValueError(
                f"{e}\ntps.function({name_of(self._fn)}): values computed by strategies over different "
                f"devices ({names}) were combined; TensorFlow copies one to the other's device, JAX does "
                "not (README, 'Where we differ': results of strategies over different devices).\nFix: "
                "move one value first, e.g. `a + jax.device_put(b, next(iter(a.devices())))`, or run "
                "both computations on one strategy."
            ) from e

    def _call(self, found: _Entry, inputs: signature.Inputs, batches: dict[Any, list[signature.Inputs]]) -> Any:
        extra = []
        for source, count in found.traced.pull_layout:
            for batch in batches[source][:count]:
                extra.extend(batch.arrays)
        return found.program(inputs.arrays, extra)

    def _compile(self, traced: trace.Traced, inputs: signature.Inputs,
                 pulled: dict[Any, list[signature.Inputs]]) -> Program:
        closed = traced.closed
        strategy = next((s for s in traced.strategies if not contracts.is_default(s)), None)
        extra_split = []
        for source, count in traced.pull_layout:
            for batch in pulled.get(source, [])[:count]:
                extra_split.extend(split_flags(batch.specs))
        placement = Placement.of(strategy)
        out_shardings = None
        self._one_process = jax.process_count() == 1
        if placement is not None:
            self._split_sharding = placement.split
            # Cross-replica results live replicated over the whole job (readable on every
            # process), per-replica ones split over the replicas, variables where they live.
            out_shardings = tuple(
                [placement.split if k.kind is outputs.Kind.PER_REPLICA else placement.replicated
                 for k in traced.out_kinds if not k.is_static]
                + [placement.variable_sharding(v) for v in traced.written])
        def jit_with(donate: tuple[int, ...] = ()) -> Any:
            return jax.jit(lambda *flat: tuple(jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *flat)),
                           out_shardings=out_shardings, donate_argnums=donate)

        return Program(jit_with(), placement, split_flags(inputs.specs), traced.variables,
                       traced.written, traced.out_treedef, traced.out_kinds, 0,
                       f"tps.function({name_of(self._fn)})",
                       extra_split=extra_split or None, jit_with=jit_with,
                       donatable=donatable_inputs(closed, len(inputs.specs), traced.variables, traced.written))


def _pulls_nothing(found: _Entry) -> bool:
    """Whether the program's trace pulled no batch and met no end of data (its fast key is enough)."""
    log = found.traced.pull_log
    return not found.pull_signature and (log is None or not (log.counts or log.ended or log.order))


def _distinct_strategies(strategies: list[Any]) -> list[Any]:
    return [s for s in dict.fromkeys(strategies) if not contracts.is_default(s)]


def _spans_several_device_sets(strategies: list[Any]) -> bool:
    return len({frozenset(s.mesh.devices.flat) for s in _distinct_strategies(strategies)}) > 1


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


def _ends_of(traced: trace.Traced) -> dict[Any, int]:
    log = traced.pull_log
    if log is None:
        return {}
    return {s: log.counts[s] for s in log.ended}
