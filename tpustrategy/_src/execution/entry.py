"""What both entries of compiled user code share: the fast cache and the fallback decision.

User code is compiled in one place: ``runner.ReplicaRunner`` (``strategy.run``) and
``cross.CrossFunction`` (``tps.function``). Both

- find a repeated call's program in a ``FastCache``: by the last hit's compiled guard, else by
  the call's key (``leaves.call_key``: the leaves' kinds, shapes and dtypes read straight off
  tuples, lists, dicts and namedtuples of arrays, distributed values and Python scalars), and
  call it at once (``Program.fast``). Anything else (other containers, objects, host-built
  ``PerReplica`` values not stacked yet, tracers) has no key and takes the classifying path,
  which builds the program the next call finds;
- turn an error met while tracing into a ``Decision`` (``replica_fallback``,
  ``cross_fallback``): compile again (``RETRY``), run eagerly (``EAGER``) or raise
  (``RAISE``), each with its reason. ``CONCRETIZATION_ERRORS`` is the one list of
  errors that mean "a traced value was used as a Python value".
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

import jax

from tpustrategy._src.activity import ANY
from tpustrategy._src.execution import leaves

# A traced value used as a Python value (``if x > 0:``, ``int(x)``, ``range(n)``, ``np.asarray(x)``);
# ``TracerBoolConversionError`` is a ``ConcretizationTypeError``.
CONCRETIZATION_ERRORS: tuple[type[BaseException], ...] = (
    jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError,
    jax.errors.TracerArrayConversionError)


def name_of(fn: Any) -> str:
    """The user's name for ``fn`` (qualified name, else its repr)."""
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


# The fast cache ---------------------------------------------------------------------------------
MISS = object()  # ``FastCache.call``: no program cached for this call (take the full path)


class FastCache:
    """Programs by owner (a replica function, a ``tps.function``) and call key
    (``leaves.call_key``). Owners are told apart by identity; the owner object is kept, so a
    reused id never finds another's.

    A call meets at most three tiers: ``call`` checks the arguments against the last hit's
    compiled guard (``leaves.compile_guard``: the key's structure read straight off the
    arguments, as a loop passing its batch or its state back makes); ``lookup`` builds the key
    and looks it up; a miss there is the entries' own path (classify, their signature cache,
    build), which ``put``s the program the next call finds.
    """

    def __init__(self, size: int, gate: Any = None):
        """``gate``: while anything is active somewhere (``activity.ANY``), ``gate()`` says whether
        a call may take the fast path at all (None: the caller checked already)."""
        self._size = size
        self._gate = gate
        self._count = 0
        self._by_owner: dict[int, tuple[Any, dict[tuple[Any, ...], Any]]] = {}
        # The last hit without keyword arguments: (owner, its key's guard, program, split). Public:
        # ``Function.__call__`` runs ``call``'s steps inline (a frame less per step).
        self.last_hit: tuple[Any, Any, Any, Any] | None = None
        self._guards: dict[tuple[Any, ...], Any] = {}  # per key: its guard (None: the key has none)

    def call(self, owner: Any, args: tuple[Any, ...] | list[Any]) -> Any:
        """The result of a call of ``owner`` with ``args`` (no keyword arguments; the caller is
        outside every variable frame) when the last hit's guard passes it, else ``MISS`` (then
        the caller's full path looks the call up by its key). Nothing is computed for a miss."""
        if ANY and self._gate is not None and not self._gate():
            return MISS
        guarded = self.last_hit
        if guarded is not None and guarded[0] is owner:
            arrays = guarded[1](args, guarded[3])
            if arrays is not None:
                return guarded[2].fast(arrays)
        return MISS

    def lookup(self, owner: Any, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any] | None,
               split: Any) -> tuple[Any, list[Any], tuple[Any, ...]] | None:
        """``(program, dynamic inputs, key)`` of a call with a key (``program`` None when none was
        built for it yet: the caller builds one and ``put``s it), else None."""
        found_key = leaves.call_key(args, kwargs, split)
        if found_key is None:
            return None
        key, arrays = found_key
        found = self._by_owner.get(id(owner))
        program = found[1].get(key) if found is not None and found[0] is owner else None
        if program is not None and not kwargs:
            self._guard(owner, key, program, split)
        return program, arrays, key

    def _guard(self, owner: Any, key: tuple[Any, ...], program: Any, split: Any) -> None:
        """Remembers the hit's guard (compiled once per key) for the owner's next call."""
        if key in self._guards:
            guard = self._guards[key]
        else:
            if len(self._guards) >= self._size:
                self._guards.clear()
            guard = self._guards[key] = leaves.compile_guard(key)
        self.last_hit = (owner, guard, program, split) if guard is not None else None

    def put(self, owner: Any, key: tuple[Any, ...], value: Any) -> None:
        if self._count >= self._size:
            self._by_owner.clear()
            self._count = 0
        self.last_hit = None  # a key may get another program: look the next hit up
        found = self._by_owner.get(id(owner))
        if found is None or found[0] is not owner:
            found = self._by_owner[id(owner)] = (owner, {})
        if key not in found[1]:
            self._count += 1
        found[1][key] = value

    def forget(self, owner: Any) -> None:
        found = self._by_owner.get(id(owner))
        if found is not None and found[0] is owner:
            del self._by_owner[id(owner)]
            self._count -= len(found[1])
        if self.last_hit is not None and self.last_hit[0] is owner:
            self.last_hit = None


# Fallback decisions --------------------------------------------------------------------------
class Action(enum.Enum):
    """What a failed compile becomes."""

    RETRY = "retry"  # compile again (tps.function: scalar arguments made static)
    EAGER = "eager"  # run the replica function on the eager back end
    RAISE = "raise"  # raise ``Decision.error``


@dataclass(frozen=True)
class Decision:
    """A fallback decision: the action, why, and (``RAISE``) the error, raised from ``cause``."""

    action: Action
    reason: str = ""
    error: BaseException | None = None
    cause: BaseException | None = None


class NeedsEager(Exception):
    """The replica function cannot be compiled; carries the reason for the warning."""

    def __init__(self, reason: str, cause: BaseException):
        super().__init__(reason)
        self.reason = reason
        self.cause = cause


def replica_fallback(fn: Any, error: BaseException, in_function: bool) -> Decision | None:
    """What a replica function's failed compile becomes (None: not a fallback case, re-raise).

    Outside ``tps.function`` it runs eagerly (TensorFlow's MirroredStrategy runs such code
    per replica); inside, there is no eager fallback and the error says why.
    """
    if isinstance(error, NeedsEager):
        if in_function:
            return Decision(Action.RAISE, error.reason, ValueError(
                f"strategy.run inside tps.function: the replica function cannot be compiled, because "
                f"{error.reason}; inside tps.function there is no eager fallback.\nFix: call strategy.run "
                "outside tps.function for this step, or keep collectives out of loops and conditionals."),
                error.cause)
        return Decision(Action.EAGER, error.reason)
    if isinstance(error, CONCRETIZATION_ERRORS):
        if in_function:
            found = dynamic_shape_error(f"strategy.run({name_of(fn)})", error)
            return Decision(Action.RAISE, "dynamic shape", found, error) if found is not None else None
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return Decision(Action.EAGER, f"it uses a per-replica value as a Python value "
                                      f"({type(error).__name__}: {first})")
    return None


def cross_fallback(fn: Any, error: BaseException, can_make_static: bool) -> Decision:
    """What a ``tps.function``'s concretization error becomes: scalar arguments made static
    (``RETRY``) when it has any not yet static, else a ``RAISE`` naming the fix."""
    if can_make_static:
        return Decision(Action.RETRY, type(error).__name__)
    found = dynamic_shape_error(f"tps.function({name_of(fn)})", error)
    if found is not None:
        return Decision(Action.RAISE, "dynamic shape", found, error)
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return Decision(Action.RAISE, "python value", TypeError(
        f"tps.function({name_of(fn)}): the function uses an array argument or a computed "
        f"value as a Python value ({type(error).__name__}: {first}). Inside tps.function arrays are traced: "
        "`range(n)`, `int(x)`, `if x > 0:` and NumPy calls on them have no value at trace time.\nFix: pass "
        "loop counts and flags as Python ints/bools (they become part of the signature and retrace when "
        "they change), or use jax.lax.fori_loop / jax.lax.cond / jnp.where on arrays."), error)


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
