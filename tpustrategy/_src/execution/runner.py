"""``strategy.run``: the tracer with one replica function, and the choice of back end.

Per call: classify the inputs; look up the program for (function, signature);
on a miss, trace the replica function (``trace.ReplicaView``) and build the
uniform program — or, when the per-replica inputs differ in shape, trace it
once per class of replica shapes and build the ragged program. A replica
function that needs concrete per-replica Python values, or that the ragged
back end cannot cut, runs on the eager back end with one warning (outside
``tps.function``; inside it there is no eager fallback and the error says why).
"""

from __future__ import annotations

import collections
import warnings
from typing import Any

from tpustrategy._src.execution import eager, ragged, signature, trace, uniform
from tpustrategy._src.execution.program import Placement, Program
from tpustrategy._src.execution.protocol import ReplicaStrategy
from tpustrategy._src.variables import frames

_CACHE_SIZE = 128
# After this many programs built for distinct function objects with the same code,
# warn: a new lambda per call recompiles every call.
RETRACE_WARNING_AFTER = 5


def name_of(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


class NeedsEager(Exception):
    """The replica function cannot be compiled; carries the reason for the warning."""

    def __init__(self, reason: str, cause: BaseException):
        super().__init__(reason)
        self.reason = reason
        self.cause = cause


class ReplicaRunner:
    """Per-strategy cache of compiled replica programs."""

    def __init__(self, strategy: ReplicaStrategy):
        self._strategy = strategy
        self._cache: collections.OrderedDict[Any, tuple[Any, Program]] = collections.OrderedDict()
        self._states: dict[int, tuple[Any, trace.TraceState]] = {}
        self._eager_only: dict[int, Any] = {}
        self._builds_per_code: dict[Any, set[int]] = {}
        self._warned_codes: set[Any] = set()

    # Calling ----------------------------------------------------------------------------
    def run(self, fn: Any, args: tuple, kwargs: dict) -> Any:
        strategy = self._strategy
        placement = Placement.of(strategy)
        frame = frames.current()
        if frame is not None:
            frame.note_strategy(strategy)
        try:
            inputs = signature.classify((tuple(args), kwargs), placement.split)
        except signature.PythonComponents as e:
            # TensorFlow hands each replica its own Python value; only the eager path can.
            raise NeedsEager(str(e), e) from e
        key = (id(fn), inputs.key)
        entry = self._cache.get(key)
        if entry is None or entry[0] is not fn:
            program = self._build(fn, inputs)
            if not program.one_shot:
                self._cache[key] = (fn, program)
                if len(self._cache) > _CACHE_SIZE:
                    self._cache.popitem(last=False)
        else:
            program = entry[1]
            self._cache.move_to_end(key)
        return program(inputs.arrays)

    def run_eagerly(self, fn: Any, args: tuple, kwargs: dict) -> Any:
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
                stacklevel=4,
            )

    # Eager fallback ------------------------------------------------------------------------
    def needs_eager(self, fn: Any) -> bool:
        return self._eager_only.get(id(fn)) is fn

    def mark_eager(self, fn: Any, reason: str) -> None:
        """Remembers that ``fn`` must run eagerly, and says so once."""
        # A variable the failed compile created from a traced value never got its first
        # value (the program would have computed it): refuse rather than run on a placeholder.
        uninitialised = [v for v in self._state(fn).created if getattr(v, "_pending_init", False)]
        if uninitialised:
            raise ValueError(
                f"strategy.run: {name_of(fn)!r} cannot be compiled into one program ({reason}), and while "
                f"trying it created variables from traced values ({', '.join(v.name for v in uninitialised)}) "
                "whose first value only that program would have computed; the eager path cannot run on them."
                "\nFix: create these variables before the step (e.g. tps.Variable(jnp.zeros(shape)) under "
                "strategy.scope()), or call tps.config.run_functions_eagerly(True) before the first step."
            )
        self._eager_only[id(fn)] = fn
        warnings.warn(
            f"strategy.run: {name_of(fn)!r} cannot be compiled into one program: {reason}. It now runs "
            "eagerly, one thread per replica (slower).\nFix: use jnp.where / jax.lax.cond instead of Python "
            "control flow on replica values, keep collectives out of loops and conditionals, or call "
            "tps.config.run_functions_eagerly(True) to choose the eager path explicitly.",
            UserWarning,
            stacklevel=4,
        )


def _classes(inputs: signature.Inputs, n: int) -> tuple[list[tuple[Any, ...]], list[int]]:
    """Groups the replicas by the shapes of their components (order of first appearance)."""
    per_replica = []
    for r in range(n):
        per_replica.append(tuple(s.shapes[r] if s.is_ragged else s.local_shape for s in inputs.specs))
    classes = list(dict.fromkeys(per_replica))
    return classes, [classes.index(p) for p in per_replica]
