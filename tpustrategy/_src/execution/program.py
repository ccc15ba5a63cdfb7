"""A compiled program and its call: split the state out, dispatch, merge the updates back.

Both ``strategy.run`` and ``tps.function`` end here. A call places the
dynamic inputs where the program expects them, appends the variables' current
values (and, for ``tps.function``, the batches pulled for this call), runs
the jitted program once, bounds the number of programs in flight, writes the
new values of the variables it wrote back, and rebuilds the outputs:
``PerReplica`` for stacked per-replica results (ragged ones keep each
replica's true shape), ``Mirrored`` for replicated ones, plain arrays
otherwise. Every result lives on the strategy's mesh, so results of any two
programs (and of the eager path) combine.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tpustrategy._src.execution import dispatch, specialised
from tpustrategy._src.execution.outputs import Kind, OutKind
from tpustrategy._src.execution.protocol import ReplicaStrategy
from tpustrategy._src.execution.signature import PER_REPLICA
from tpustrategy._src.jax_shims.array_protocol import ARRAY_IMPL as _ArrayImpl
from tpustrategy._src.values.distributed import Mirrored, PerReplica
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS
from tpustrategy._src.variables import frames

_Tracer = jax.core.Tracer
_placements: weakref.WeakKeyDictionary[Any, Placement] = weakref.WeakKeyDictionary()


def _is_tracer(x: Any) -> bool:
    return isinstance(x, _Tracer)


def _already_on(x: jax.Array, target: Any) -> bool:
    """Whether ``x`` lies where ``target`` puts it: the same sharding, or an equivalent one (an
    array on one device taken by a one-device mesh: ``SingleDeviceSharding`` and ``NamedSharding``
    describe the same layout). A program takes such an array as it is, without a copy."""
    sharding = x.sharding
    if sharding == target:
        return True
    try:
        return bool(sharding.is_equivalent_to(target, x.ndim))
    except (TypeError, ValueError, AttributeError):  # shardings of different kinds JAX cannot compare
        return False


@dataclass
class Placement:
    """Where a strategy's programs take their inputs."""

    replicated: Any
    split: Any

    @classmethod
    def of(cls, strategy: ReplicaStrategy | None) -> Placement | None:
        if strategy is None:
            return None
        cached = _placements.get(strategy)
        if cached is None:
            mesh = strategy.mesh
            cached = _placements[strategy] = cls(NamedSharding(mesh, P()), NamedSharding(mesh, P(REPLICA_AXIS)))
        return cached

    def put(self, x: Any, split: bool) -> Any:
        return self.put_to(x, self.split if split else self.replicated)

    def put_to(self, x: Any, target: Any) -> Any:
        if _is_tracer(x):
            return x
        if isinstance(x, jax.Array):
            if _already_on(x, target):
                return x
            if target is self.replicated and len(x.sharding.device_set) > 1 and x.sharding.is_fully_replicated \
                    and x.sharding.device_set == target.device_set:
                return x
        if target is self.replicated and not target.is_fully_addressable:
            # Multi-host: a value every process holds (a plain variable, a broadcast
            # argument) becomes one array replicated over the whole job.
            host = np.asarray(x)
            return jax.make_array_from_process_local_data(target, host, host.shape)
        return jax.device_put(x, target)

    def variable_sharding(self, var: Any) -> Any:
        """Where a variable lives: split over replicas (sync-on-read), over a replica's cores
        (split with ``experimental_split_to_logical_devices``), or replicated."""
        if var.kind == "sync_on_read":
            return self.split
        spec = var.core_spec
        return NamedSharding(self.replicated.mesh, spec) if spec is not None else self.replicated


@dataclass
class Program:
    """A jitted program with the bookkeeping to call it like the traced function."""

    jitted: Any
    placement: Placement | None
    in_split: list[bool]  # per dynamic argument: enters split over the replica axis
    variables: list[Any]
    written: list[Any]
    out_treedef: Any
    out_kinds: list[OutKind]
    num_replicas: int
    name: str = "function"
    extra_split: list[bool] | None = None  # per input after the variables (pulled batches)
    one_shot: bool = False  # initialises variables created while tracing: never reused
    # Dynamic results (by index) that also come back as per-device copies (``uniform.local_copies``).
    local_copies: list[int] | None = None
    # ``jit_with(donate_argnums)``: the same program jitted with those arguments donated, and the
    # arguments that may be donated (``donatable_inputs``: written variables' current values).
    jit_with: Any = None
    donatable: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        placement = self.placement
        # Where each dynamic input, then each variable, enters (worked out once per program).
        self._targets = ([placement.split if s else placement.replicated for s in self.in_split]
                         + [placement.variable_sharding(v) for v in self.variables]
                         if placement is not None else [])
        n_copies = len(self.local_copies or ())
        self._one_leaf = self.out_treedef.num_nodes == 1 and self.out_treedef.num_leaves == 1
        # Per input: a sharding object already found equal to its target. Output arrays of one
        # program share one sharding object, so a variable a program wrote is checked by identity.
        self._seen: list[Any] = list(self._targets)
        plan = _rebuild_plan(self.out_kinds, self.num_replicas)
        # The written variables' new values among the outputs: after the dynamic results; the
        # per-device copies of ``local_copies`` come last.
        self._w0 = sum(1 for code, _ in plan if code not in (_STATIC, _STATIC_PER_REPLICA))
        self._w1 = self._w0 + len(self.written)
        self._plan = _place_plan(plan, self._w1, self.local_copies or [])
        # A result that is one Mirrored value (a reduced loss): its number of replicas.
        single = plan[0] if self._one_leaf and len(plan) == 1 else None
        self._single_mirrored = single[1] if single is not None and single[0] == _MIRRORED \
            and not n_copies else 0
        # Per Mirrored result (by output index): its fast key, the same for every call, worked out
        # from the first concrete output. Kept with each result while the devices compute, so a
        # loop passing the results back (functional state) needs no key after its wait.
        self._mirrored_keys: list[tuple[Any, ...] | None] = [None] * max(self._w0, 1)
        self._keys_pending = any(step[0] == _MIRRORED for step in self._plan)
        # The output pytree made in one generated expression (None: a structure it does not know).
        self._build = specialised.compile_builder(list(self._plan), self.out_treedef)
        # What the fast path's hits call (outside every variable frame): the general call until
        # the first call has made the Mirrored results' keys known, then the generated call
        # (``specialised.compile_call``) where the program has one.
        self.fast: Any = self._call_and_specialise
        # The output that stands for the program in the bound on programs in flight
        # (``dispatch``): its smallest, found at the first concrete call. Every output of a program
        # is ready when it ends, and a kept output keeps its buffers: keeping a large one (a
        # model's first weight) makes the next programs write their outputs to fresh memory,
        # which measured +25 µs of CPU per call for a 64-256-10 MLP step on 8 CPU devices.
        self._token: int | None = None

    def __call__(self, arrays: list[Any], extra: Sequence[Any] = ()) -> Any:
        placement = self.placement
        inputs = arrays + frames.global_values(self.variables) if self.variables else arrays
        if placement is not None:
            # An input already where the program takes it (the common case) is passed as is.
            seen = self._seen
            i = 0
            for x in inputs:
                if type(x) is not _ArrayImpl or x.sharding is not seen[i]:
                    inputs = self._place(inputs, arrays, i)
                i += 1
            if extra:
                inputs = inputs + [placement.put(x, s) for x, s in zip(extra, self.extra_split or [])]
        elif extra:
            inputs = [*inputs, *extra]
        return self._finish(self.jitted(*inputs))

    def _finish(self, outs: Any) -> Any:
        """The call after the dispatch: the bound on programs in flight, the written variables'
        new values, the results."""
        if outs and self._token is None and type(outs[0]) is _ArrayImpl:
            self._token = _smallest(outs, range(self._w0, self._w1))
        token = outs[self._token or 0] if outs else None
        if token is not None:
            dispatch.track_array(token)
            if self._keys_pending and type(token) is _ArrayImpl:
                self._fill_keys(outs)
        if self.written:
            if type(token) is not _ArrayImpl and _is_tracer(token) and frames.outermost() is None:
                raise self._escaping_writes()  # inside a user's jax.jit / jax.grad
            frames.write_back(self.written, outs[self._w0:self._w1])
        single = self._single_mirrored
        if single:
            return self._mirrored(outs[0], single, 0)
        return self._results(outs)

    def _call_and_specialise(self, arrays: list[Any]) -> Any:
        """``fast`` until the program's call is generated: the general call, then (once the
        Mirrored results' fast keys are known) ``fast`` becomes the generated call."""
        result = self(arrays)
        if not self._keys_pending:
            self.fast = self._specialised()
        return result

    def _specialised(self) -> Any:
        """``specialised.compile_call`` for this program, or the general call."""
        if self.placement is None or self.one_shot or self.extra_split \
                or any(frames.awaits_first_value(v) for v in self.written):
            return self.__call__
        generated = specialised.compile_call(
            jitted=self.jitted, num_inputs=len(self.in_split), seen=self._seen, variables=self.variables,
            donating=self._donating(), token=self._token or 0,
            written=[(v, self._w0 + j) for j, v in enumerate(self.written)], steps=list(self._plan),
            treedef=self.out_treedef, keys=self._mirrored_keys, general=self.__call__, finish=self._finish)
        return generated if generated is not None else self.__call__

    def _donating(self) -> tuple[Any, tuple[int, ...]] | None:
        """``(jitted, argument indices)``: the program donating the written variables' current
        values, for the generated call to use when nothing else holds them; None: no donation.
        The variable whose new value stands for the program in the bound on programs in flight
        is left out (``dispatch`` keeps that array)."""
        if self.jit_with is None or not self.donatable:
            return None
        token = self._token or 0
        kept = None
        if self._w0 <= token < self._w1:
            written = self.written[token - self._w0]
            kept = next((len(self.in_split) + i for i, v in enumerate(self.variables) if v is written), None)
        donate = tuple(i for i in self.donatable if i != kept)
        return (self.jit_with(donate), donate) if donate else None

    def _mirrored(self, array: Any, num_replicas: int, index: int) -> Mirrored:
        if type(array) is not _ArrayImpl:
            return Mirrored.from_replicated(array, num_replicas)
        return Mirrored.from_replicated(array, num_replicas, self._mirrored_keys[index])  # ``_finish`` filled it

    def _place(self, inputs: list[Any], arrays: list[Any], i: int) -> list[Any]:
        """``inputs`` with input ``i`` placed on its target (a copy when ``inputs`` is the
        caller's ``arrays``); a sharding found equal to the target is remembered."""
        x, target = inputs[i], self._targets[i]
        if type(x) is _ArrayImpl and _already_on(x, target):
            self._seen[i] = x.sharding
            return inputs
        if inputs is arrays:
            inputs = list(arrays)
        inputs[i] = self.placement.put_to(x, target)  # type: ignore[union-attr]
        return inputs

    def _escaping_writes(self) -> TypeError:
        return TypeError(
            f"{self.name}: called inside a JAX transformation (jax.jit, jax.grad, ...) that is not "
            f"tps.function, and it writes variables ({', '.join(v.name for v in self.written)}); their "
            "new values would be tracers that escape the transformation.\nFix: use @tps.function instead "
            "of @jax.jit around strategy.run, or pass the state as arguments and return it."
        )

    def _results(self, outs: Any) -> Any:
        """The user's output pytree from the program's outputs (the results, then the written
        variables' new values, then the per-device copies of ``local_copies``)."""
        build = self._build
        if build is not None:
            return build(outs, self._mirrored_keys)
        return self._results_by_plan(outs)

    def _fill_keys(self, outs: Any) -> None:
        """The fast key of every Mirrored result, from the first concrete outputs."""
        keys = self._mirrored_keys
        for code, arg, i, _ in self._plan:
            if code == _MIRRORED and keys[i] is None and type(outs[i]) is _ArrayImpl:
                keys[i] = Mirrored.fast_key_of(outs[i], arg)
        self._keys_pending = False

    def _results_by_plan(self, outs: Any) -> Any:
        """``_results`` for an output structure ``specialised.compile_builder`` does not
        generate (custom pytree nodes): the plan's leaves, unflattened."""
        leaves: list[Any] = []
        append = leaves.append
        for code, arg, i, copy in self._plan:
            if code == _MIRRORED:
                append(self._mirrored(outs[i], arg, i))
            elif code == _PLAIN:
                append(outs[i])
            elif code == _VARYING:
                local = outs[copy] if copy >= 0 else None
                append(PerReplica.from_output(outs[i], arg, local if type(local) is _ArrayImpl else None))
            elif code == _PER_REPLICA:
                cls, shapes = arg
                append(cls.from_stacked(outs[i], shapes))
            elif code == _STATIC:
                append(arg)
            else:  # _STATIC_PER_REPLICA
                append(PerReplica(list(arg)))
        if self._one_leaf:
            return leaves[0]
        return jax.tree_util.tree_unflatten(self.out_treedef, leaves)


# How ``_results`` makes each output leaf (``_rebuild_plan``): ``specialised``'s vocabulary.
_STATIC, _STATIC_PER_REPLICA, _PER_REPLICA = specialised.STATIC, specialised.STATIC_PER_REPLICA, specialised.PER_REPLICA
_MIRRORED, _VARYING, _PLAIN = specialised.MIRRORED, specialised.VARYING, specialised.PLAIN


def _rebuild_plan(out_kinds: list[OutKind], n: int) -> tuple[tuple[int, Any], ...]:
    plan: list[tuple[int, Any]] = []
    for out in out_kinds:
        kind = out.kind
        if kind is Kind.STATIC:
            plan.append((_STATIC, out.value))
        elif kind is Kind.STATIC_PER_REPLICA:
            plan.append((_STATIC_PER_REPLICA, out.value))
        elif kind is Kind.PER_REPLICA:
            plan.append((_PER_REPLICA, (cast(type[PerReplica], out.cls), out.shapes)))
        elif kind is Kind.MIRRORED:
            plan.append((_MIRRORED, out.num_replicas))
        elif kind is Kind.VARYING:
            if n == 1:
                plan.append((_PLAIN, None))
            elif out.shapes is not None or n < 1:  # ragged (each replica's true shape), or R unknown
                plan.append((_PER_REPLICA, (PerReplica, out.shapes)))
            else:
                plan.append((_VARYING, n))
        elif kind is Kind.INVARIANT:
            plan.append((_PLAIN, None) if n == 1 else (_MIRRORED, n))
        else:  # Kind.ARRAY
            plan.append((_PLAIN, None))
    return tuple(plan)


def _place_plan(plan: tuple[tuple[int, Any], ...], copies_at: int,
                local_copies: list[int]) -> tuple[tuple[int, Any, int, int], ...]:
    """Each step of ``plan`` with the index among the program's outputs of its dynamic result
    and of that result's per-device copy (-1: none); the copies start at ``copies_at``."""
    copy_of = {j: copies_at + k for k, j in enumerate(local_copies)}
    placed = []
    i = 0
    for code, arg in plan:
        if code in (_STATIC, _STATIC_PER_REPLICA):
            placed.append((code, arg, -1, -1))
        else:
            placed.append((code, arg, i, copy_of.get(i, -1)))
            i += 1
    return tuple(placed)


def split_flags(specs: list[Any]) -> list[bool]:
    return [s.kind == PER_REPLICA for s in specs]


def _smallest(outs: Sequence[Any], written: range = range(0)) -> int:
    """The index of the output array with the fewest bytes, not none (the first on a tie; an
    empty array's readiness may not be its program's), a result rather than a written variable's
    new value when there is one (a kept variable value could not be donated to the next call)."""
    sizes = [int(x.nbytes) or 1 << 62 if type(x) is _ArrayImpl else 1 << 62 for x in outs]
    results = [i for i in range(len(outs)) if i not in written and sizes[i] < 1 << 62]
    return min(results, key=sizes.__getitem__) if results else sizes.index(min(sizes))


def donatable_inputs(closed: Any, num_inputs: int, variables: list[Any], written: list[Any]) -> tuple[int, ...]:
    """The argument indices of written variables whose old value the program may overwrite: the
    variable enters the program (after ``num_inputs`` dynamic inputs) and leaves it with the same
    shape and dtype (``closed``: the traced program, its outputs ending with the written values)."""
    invars, outvars = closed.jaxpr.invars, closed.jaxpr.outvars
    first = len(outvars) - len(written)
    found = []
    for j, var in enumerate(written):
        i = next((i for i, v in enumerate(variables) if v is var), None)
        if i is None or num_inputs + i >= len(invars):
            continue
        a, b = invars[num_inputs + i].aval, outvars[first + j].aval
        if getattr(a, "shape", None) == getattr(b, "shape", ()) and getattr(a, "dtype", None) == getattr(b, "dtype", 0):
            found.append(num_inputs + i)
    return tuple(found)
