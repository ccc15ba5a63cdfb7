"""``strategy.run``: the tracer with one replica function, and the choice of back end.

``ReplicaRunner.call`` is the whole replica path; ``Strategy.run`` only validates its
arguments. Per call: a call whose key (``leaves.call_key``: kinds, shapes, dtypes)
has a program goes straight to it (``fast_call``, which ``Strategy.run`` tries before
any check: a call it takes was checked when its program was built, and the context it
needs is re-checked). Otherwise classify the inputs; look up the program
for (function, signature); on a miss, trace the replica function
(``trace.ReplicaView``) and build the uniform program — or, when the per-replica inputs
differ in shape, trace it once per class of replica shapes and build the ragged
program. A replica function that needs concrete per-replica Python values, or that the
ragged back end cannot cut, runs on the eager back end with one warning (outside
``tps.function``; inside it there is no eager fallback and the error says why): the
choice is ``entry.replica_fallback``'s ``Decision``.
"""

from __future__ import annotations

import collections
import contextlib
import warnings
from typing import Any

import jax

from tpustrategy._src import config
from tpustrategy._src.context import stack as context
from tpustrategy._src.execution import (
    eager,
    entry,
    host_values,
    leaves,
    ragged,
    signature,
    trace,
    uniform,
)
from tpustrategy._src.execution.entry import NeedsEager, name_of
from tpustrategy._src.execution.program import Placement, Program
from tpustrategy._src.execution.protocol import ReplicaStrategy
from tpustrategy._src.execution.tracebacks import user_stacklevel
from tpustrategy._src.variables import frames

_CACHE_SIZE = 128
# After this many programs built for distinct function objects with the same code,
# warn: a new lambda per call recompiles every call.
RETRACE_WARNING_AFTER = 5
# Errors of a trace that may become a fallback (``entry.replica_fallback``).
_FALLBACK_ERRORS: tuple[type[BaseException], ...] = (NeedsEager, *entry.CONCRETIZATION_ERRORS)

__all__ = ["MISS", "NeedsEager", "ReplicaRunner", "name_of"]

MISS = entry.MISS  # ``fast_call``: no program for this call yet (take ``call``)


class ReplicaRunner:
    """Per-strategy cache of compiled replica programs, and the replica path of ``strategy.run``."""

    def __init__(self, strategy: ReplicaStrategy):
        self._strategy = strategy
        self._cache: collections.OrderedDict[Any, tuple[Any, Program]] = collections.OrderedDict()
        self._fast = entry.FastCache(2 * _CACHE_SIZE, gate=self._fast_allowed)
        # ``fast_call(fn, args)``: the result of ``strategy.run(fn, args)`` when the call repeats
        # the last one that found a program (``FastCache.call``) and nothing asks for another
        # path (a trace, the eager switch, a replica context or another strategy's scope); else
        # ``MISS``. The cache's own method, so a hit costs no frame of this class.
        self.fast_call = self._fast.call
        self._states: dict[int, tuple[Any, trace.TraceState]] = {}
        self._eager_only: dict[int, Any] = {}
        self._builds_per_code: dict[Any, set[int]] = {}
        self._warned_codes: set[Any] = set()
        # Fixed once the strategy's devices exist (the backend is started): the fast path is
        # one process's (across processes every call agrees on host-built shapes first). Only
        # ``call`` (one process) makes the hits ``fast_call`` repeats.
        self._one_process = jax.process_count() == 1
        self._split: Any = None

    # Calling ----------------------------------------------------------------------------
    def _fast_allowed(self) -> bool:
        """While something is active somewhere (``activity.ANY``): whether a call may still take
        ``fast_call`` (outside every trace, functions not forced eager, in this strategy's
        cross-replica context or none)."""
        if frames.current() is not None or config.functions_run_eagerly():
            return False
        found = context.current_entry()
        return found is None or (found.replica_context is None and found.strategy is self._strategy)

    def call(self, fn: Any, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> Any:
        """``strategy.run(fn, args, kwargs)`` once the arguments are validated (cross-replica
        context already checked): the fast path, else classify, build, call or fall back."""
        key = None
        if self._one_process and frames.current() is None and not config.functions_run_eagerly():
            hit = self._fast.lookup(fn, args, kwargs, self._split_sharding())
            if hit is not None:
                if hit[0] is not None:
                    return hit[0].fast(hit[1])
                key = hit[2]
        with self._entered():
            if not self._one_process and frames.current() is None:
                host_values.agree_on_shapes((args, kwargs))
            if config.functions_run_eagerly() or self.needs_eager(fn):
                return self.run_eagerly(fn, args, kwargs)
            try:
                return self.run(fn, args, kwargs, key)
            except _FALLBACK_ERRORS as e:
                decision = entry.replica_fallback(fn, e, in_function=frames.current() is not None)
                if decision is None:
                    raise
                if decision.action is entry.Action.RAISE:
                    raise decision.error from decision.cause  # type: ignore[misc]
                self.mark_eager(fn, decision.reason)
                return self.run_eagerly(fn, args, kwargs)

    def _entered(self) -> contextlib.AbstractContextManager[Any]:
        """The strategy's cross-replica entry while the function is traced or run eagerly."""
        found = context.current_entry()
        if found is not None and found.strategy is self._strategy:
            return contextlib.nullcontext()
        return context.push(self._strategy, None)

    def _split_sharding(self) -> Any:
        if self._split is None:
            placement = Placement.of(self._strategy)
            self._split = placement.split if placement is not None else None
        return self._split

    def run(self, fn: Any, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any],
            fast: tuple[Any, ...] | None = None) -> Any:
        """The compiled path (classify, look up or build, call); ``fast``: the call's fast key."""
        strategy = self._strategy
        placement = Placement.of(strategy)
        frame = frames.current()
        if frame is not None:
            frame.note_strategy(strategy)
        try:
            inputs = signature.classify((tuple(args), kwargs), placement.split if placement else None,
                                        leaves.refuse_in_run)
        except signature.PythonComponents as e:
            # TensorFlow hands each replica its own Python value; only the eager path can.
            raise NeedsEager(str(e), e) from e
        key = (id(fn), inputs.key)
        found = self._cache.get(key)
        if found is None or found[0] is not fn:
            program = self._build(fn, inputs)
            if not program.one_shot:
                self._cache[key] = (fn, program)
                if len(self._cache) > _CACHE_SIZE:
                    self._cache.popitem(last=False)
        else:
            program = found[1]
            self._cache.move_to_end(key)
        if fast is not None and not program.one_shot:
            self._fast.put(fn, fast, program)
        return program(inputs.arrays)

    def run_eagerly(self, fn: Any, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> Any:
        return eager.run_eagerly(self._strategy, fn, tuple(args), kwargs)

    # Building ------------------------------------------------------------------------------
    def _state(self, fn: Any) -> trace.TraceState:
        found = self._states.get(id(fn))
        if found is None or found[0] is not fn:
            found = (fn, trace.TraceState())
            self._states[id(fn)] = found
        return found[1]

    def _build(self, fn: Any, inputs: signature.Inputs) -> Program:
        self._note_build(fn)
        strategy, state, name = self._strategy, self._state(fn), f"strategy.run({name_of(fn)})"
        if not inputs.is_ragged:
            traced = trace.trace(fn, inputs, trace.ReplicaView(strategy), state)
            return uniform.build(traced, inputs, strategy, name)
        classes, class_of = _classes(inputs, strategy.num_replicas_in_sync)
        while True:
            known = list(state.known_vars)
            traces = [trace.trace(fn, inputs, trace.ReplicaView(strategy, list(c)), state) for c in classes]
            if state.known_vars == known and all(t.variables == known for t in traces):
                break
        try:
            return ragged.build(traces, class_of, inputs, strategy, name)
        except ragged.Unsupported as e:
            raise NeedsEager(f"its replicas' inputs differ in shape and {e}", e) from e

    def _note_build(self, fn: Any) -> None:
        code = getattr(fn, "__code__", None)
        if code is None:
            return
        ids = self._builds_per_code.setdefault(code, set())
        ids.add(id(fn))
        if len(ids) >= RETRACE_WARNING_AFTER and code not in self._warned_codes:
            self._warned_codes.add(code)
            warnings.warn(
                f"strategy.run: {name_of(fn)!r} ({code.co_filename}:{code.co_firstlineno}) has been traced "
                f"and compiled for {len(ids)} different function objects with the same code: a new function "
                "(a lambda or nested def) is created for every call, and programs are cached per function "
                "object, so every call compiles again.\nFix: define the replica function once, outside the "
                "loop, and pass what changes as arguments.",
                UserWarning,
                stacklevel=user_stacklevel(),
            )

    # Eager fallback ------------------------------------------------------------------------
    def needs_eager(self, fn: Any) -> bool:
        return self._eager_only.get(id(fn)) is fn

    def mark_eager(self, fn: Any, reason: str) -> None:
        """Remembers that ``fn`` must run eagerly, and says so once."""
        # A variable the failed compile created from a traced value never got its first
        # value (the program would have computed it): refuse rather than run on a placeholder.
        uninitialised = [v for v in self._state(fn).created if frames.awaits_first_value(v)]
        if uninitialised:
            raise ValueError(
                f"strategy.run: {name_of(fn)!r} cannot be compiled into one program ({reason}), and while "
                f"trying it created variables from traced values ({', '.join(v.name for v in uninitialised)}) "
                "whose first value only that program would have computed; the eager path cannot run on them."
                "\nFix: create these variables before the step (e.g. tps.Variable(jnp.zeros(shape)) under "
                "strategy.scope()), or call tps.config.run_functions_eagerly(True) before the first step."
            )
        self._eager_only[id(fn)] = fn
        self._fast.forget(fn)
        warnings.warn(
            f"strategy.run: {name_of(fn)!r} cannot be compiled into one program: {reason}. It now runs "
            "eagerly, one thread per replica (slower).\nFix: use jnp.where / jax.lax.cond instead of Python "
            "control flow on replica values, keep collectives out of loops and conditionals, or call "
            "tps.config.run_functions_eagerly(True) to choose the eager path explicitly.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )


def _classes(inputs: signature.Inputs, n: int) -> tuple[list[tuple[Any, ...]], list[int]]:
    """Groups the replicas by the shapes of their components (order of first appearance)."""
    per_replica = []
    for r in range(n):
        per_replica.append(tuple(s.shapes[r] if s.shapes is not None else s.local_shape for s in inputs.specs))
    classes = list(dict.fromkeys(per_replica))
    return classes, [classes.index(p) for p in per_replica]
