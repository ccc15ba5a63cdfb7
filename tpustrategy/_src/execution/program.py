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

import sys
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tpustrategy._src.execution import dispatch, specialised
from tpustrategy._src.execution.outputs import OutKind
from tpustrategy._src.execution.protocol import ReplicaStrategy
from tpustrategy._src.execution.results import ResultPlan
from tpustrategy._src.jax_shims.array_protocol import ARRAY_IMPL as _ArrayImpl
from tpustrategy._src.values.distributed import Mirrored
from tpustrategy._src.values.leaf import LeafKind, LeafSpec
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS
from tpustrategy._src.variables import frames
from tpustrategy._src.variables import store as store_module

_Tracer = jax.core.Tracer
# After this many times other programs took its variables out of its store, a program stops
# using one (``Program._claim``).
_MAX_DISPLACED = 3
_FEW_CALLS = 16
_placements: weakref.WeakKeyDictionary[Any, Placement] = weakref.WeakKeyDictionary()
# ``Program._mode``: the donation decision of its first concrete call.
_DONATE = "donate"
_KEEP = "keep"
_refs = sys.getrefcount


def _copy(x: jax.Array) -> Any:
    """A copy of ``x`` where it lies (a device copy, no program), donated in its place."""
    return jax.device_put(x, x.sharding, may_alias=False)


def _sole_in_list() -> int:
    """The reference count ``_dispatch`` sees for a variable's value held only by its variable
    (``frames.global_values`` read it into the call's input list): measured on a stand-in."""

    class StandIn:
        __slots__ = ("_value",)
        _value: object

    holder = StandIn()
    holder._value = object()
    empty: list[Any] = []
    inputs = empty + frames.global_values([holder])  # type: ignore[list-item]
    return _refs(inputs[0])


_SOLE_IN_LIST = _sole_in_list()


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
                    and x.sharding.device_set == target.device_set and _same_order(x.sharding, target):
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


def _same_order(sharding: Any, target: NamedSharding) -> bool:
    """Whether a replicated array's devices are in the target mesh's order: a jitted program
    refuses the same devices in another order (a strategy over the same cores reversed,
    ``tpu_strategy_test.test_variables_mismatched_device_assignment``)."""
    if not isinstance(sharding, NamedSharding):
        return True
    return sharding.mesh.devices.flat[:].tolist() == target.mesh.devices.flat[:].tolist()


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
        # Per input: a sharding object already found equal to its target. Output arrays of one
        # program share one sharding object, so a variable a program wrote is checked by identity.
        self._seen: list[Any] = list(self._targets)
        # The outputs: the dynamic results, the written variables' new values, then the
        # per-device copies of ``local_copies``.
        n_results = sum(1 for k in self.out_kinds if not k.is_static)
        self._w0 = n_results
        self._w1 = n_results + len(self.written)
        self.plan = ResultPlan.of(self.out_kinds, self.out_treedef, self.num_replicas, self._w1,
                                  self.local_copies)
        # A result that is one Mirrored value (a reduced loss): its number of replicas.
        self._single_mirrored = self.plan.single_mirrored
        # Per Mirrored result (by output index): its leaf spec, the same for every call, worked
        # out from the first concrete output. Kept with each result while the devices compute, so
        # a loop passing the results back (functional state) reads its spec without a look.
        self._mirrored_specs: list[LeafSpec | None] = [None] * max(self._w0, 1)
        self._specs_pending = bool(self.plan.mirrored_indices())
        # The output pytree made in one generated expression (None: a structure it does not know).
        self._build = self.plan.compile()
        # What the fast path's hits call (outside every variable frame): the general call until
        # the first call has made the Mirrored results' specs known, then the generated call
        # (``specialised.compile_call``) where the program has one.
        self.fast: Any = self._call_and_specialise
        # The output that stands for the program in the bound on programs in flight
        # (``dispatch``): its smallest, found at the first concrete call. Every output of a program
        # is ready when it ends, and a kept output keeps its buffers: keeping a large one (a
        # model's first weight) makes the next programs write their outputs to fresh memory,
        # which measured +25 µs of CPU per call for a 64-256-10 MLP step on 8 CPU devices.
        self._token: int | None = None
        # The variables' values as one list (``variables.store``), when the call is generated
        # with one; how often other programs took the variables out of it since the first claim.
        self._store: store_module.Store | None = None
        self._claimed = False
        self._claimed_at = 0
        self._displaced = 0
        # Donation (``_dispatch``): ``_DONATE`` once the first concrete call found the written
        # variables' old values held only by their variables, ``_KEEP`` otherwise; ``_donate``:
        # the donating executable and its argument indices, made once.
        self._mode: object = None
        self._donate: tuple[Any, tuple[int, ...]] | None = None

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
        x = None  # the loop's last input: no reference of this frame may count as a holder
        return self._finish(self._dispatch(inputs))

    def _dispatch(self, inputs: list[Any]) -> Any:
        """The general call's dispatch: from the first concrete call on, a program that may donate
        runs the one donating executable (a written variable's old value another holder keeps is
        copied first), so it compiles once; one whose values were held elsewhere at that call
        keeps the non-donating one (the generated call then donates when it can)."""
        if self._mode is not _DONATE and (self._mode is _KEEP or not self._decide(inputs)):
            return self.jitted(*inputs)
        jitted, indices = self._donate  # type: ignore[misc]
        refs = _refs
        for i in indices:
            x = inputs[i]
            if type(x) is not _ArrayImpl:
                return self.jitted(*inputs)  # a tracer: inside a trace, where nothing is donated
            del x
            if refs(inputs[i]) > _SOLE_IN_LIST:
                inputs[i] = _copy(inputs[i])
        return jitted(*inputs)

    def _decide(self, inputs: list[Any]) -> bool:
        """At the first concrete call: whether this program donates from now on (``_donate``
        set), or keeps its values (``_mode`` ``_KEEP``). Undecided while it is called in a trace."""
        if self.jit_with is None or not self.donatable or self.placement is None or self.one_shot \
                or self.extra_split:
            self._mode = _KEEP
            return False
        n = len(self.in_split)
        if frames.outermost() is not None or any(frames.awaits_first_value(v) for v in self.written) \
                or any(type(x) is not _ArrayImpl for x in inputs[n:n + len(self.variables)]):
            return False  # in a trace, or a first value to come: decided at a later call
        if any(_refs(inputs[i]) > _SOLE_IN_LIST for i in self.donatable):
            self._mode = _KEEP  # held elsewhere from the start (a value the user kept): as before
            return False
        index = {id(v): j for j, v in enumerate(self.variables)}
        has_results = self._w0 > 0 or bool(self.local_copies)
        if self._token is None and not has_results and all(id(v) in index for v in self.written):
            # The new value that will stand for the program in the bound on programs in flight
            # (``_finish``'s choice, made now from the old values' sizes): it is not donated.
            sizes = [int(inputs[n + index[id(v)]].nbytes) or 1 << 62 for v in self.written]
            self._token = self._w0 + sizes.index(min(sizes))
        self._donate = self._donating()
        self._mode = _DONATE if self._donate is not None else _KEEP
        return self._donate is not None

    def _copying(self) -> Any:
        """The generated call's dispatch when a written variable's old value is held elsewhere:
        the donating executable on copies of the donated values (``_KEEP``: the non-donating one)."""
        if self._mode is not _DONATE:
            return self.jitted
        jitted, indices = self._donate  # type: ignore[misc]

        def call(*args: Any) -> Any:
            args_ = list(args)
            for i in indices:
                args_[i] = _copy(args_[i])
            return jitted(*args_)

        return call

    def _finish(self, outs: Any) -> Any:
        """The call after the dispatch: the bound on programs in flight, the written variables'
        new values, the results."""
        if outs and self._token is None and type(outs[0]) is _ArrayImpl:
            self._token = _smallest(outs, range(self._w0, self._w1))
        token = outs[self._token or 0] if outs else None
        if token is not None:
            dispatch.track_array(token)
            if self._specs_pending and type(token) is _ArrayImpl:
                self._fill_specs(outs)
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
        Mirrored results' leaf specs are known) ``fast`` becomes the generated call."""
        result = self(arrays)
        if not self._specs_pending:
            self.fast = self._specialised()
        return result

    def _specialised(self) -> Any:
        """``specialised.compile_call`` for this program, or the general call."""
        if self.placement is None or self.one_shot or self.extra_split \
                or any(frames.awaits_first_value(v) for v in self.written):
            return self.__call__
        held = self._store if self._store is not None else self._new_store()
        generated = specialised.compile_call(
            jitted=self.jitted, num_inputs=len(self.in_split), seen=self._seen, variables=self.variables,
            donating=self._donating(), held=self._copying(), token=self._token or 0, store=held,
            written=[(v, self._w0 + j) for j, v in enumerate(self.written)], plan=self.plan,
            specs=self._mirrored_specs, general=self._store_general if held is not None else self.__call__,
            finish=self._finish)
        if generated is None:
            return self.__call__
        if held is not None:
            self._store = held
            self._claim()
        return generated

    # The variables' values as one list -----------------------------------------------------
    def _new_store(self) -> store_module.Store | None:
        """A store for this program's variables (the written ones first, in the order the program
        returns them), or None when a variable keeps its value elsewhere (Keras's) or is written
        without being read."""
        if not self.variables or self._displaced > _MAX_DISPLACED \
                or not all(store_module.storable(v) for v in self.variables):
            return None
        ids = {id(v) for v in self.variables}
        if not all(id(v) in ids for v in self.written):
            return None
        written = {id(v) for v in self.written}
        order = list(self.written) + [v for v in self.variables if id(v) not in written]
        n = len(self.in_split)
        target = {id(v): self._targets[n + j] for j, v in enumerate(self.variables)}
        return store_module.shared(order, [target[id(v)] for v in order])

    def _store_general(self, arrays: list[Any]) -> Any:
        """The generated call's exit when its store is not known good (a variable written or
        placed outside the program, or claimed by another program's store) or an input needs
        placing: the general call, then the store claims its variables again."""
        result = self(arrays)
        self._claim()
        return result

    def _claim(self) -> None:
        """Moves the program's variables' values into its store and checks them: ``ok`` when each
        is a concrete array where the program takes it. A program whose variables other programs
        keep claiming (two programs over the same variables, called in turn) stops using a store:
        its call then reads and writes each variable on its own."""
        held = self._store
        if held is None:
            return
        moved = store_module.claim(held)
        calls = held.tick() - self._claimed_at
        self._claimed_at += calls
        if moved and self._claimed:
            # Taken out of it after only a few calls: two programs over the same variables, in turn.
            self._displaced = self._displaced + 1 if calls < _FEW_CALLS else 0
            if self._displaced > _MAX_DISPLACED:
                self._store = None
                self.fast = self._specialised()
                return
        self._claimed = True
        n = len(self.in_split)
        index = {id(v): j for j, v in enumerate(self.variables)}
        for var, value in zip(held.variables, held.values):
            j = n + index[id(var)]
            if type(value) is not _ArrayImpl or (value.sharding is not self._seen[j]
                                                 and not _already_on(value, self._targets[j])):
                held.ok = False
                return
        held.ok = True

    def _donating(self) -> tuple[Any, tuple[int, ...]] | None:
        """``(jitted, argument indices)``: the program donating the written variables' current
        values, for the generated call to use when nothing else holds them; None: no donation.
        The variable whose new value stands for the program in the bound on programs in flight
        is left out (``dispatch`` keeps that array)."""
        if self._donate is not None:
            return self._donate
        if self.jit_with is None or not self.donatable:
            return None
        token = self._token or 0
        kept = None
        if self._w0 <= token < self._w1:
            written = self.written[token - self._w0]
            kept = next((len(self.in_split) + i for i, v in enumerate(self.variables) if v is written), None)
        donate = tuple(i for i in self.donatable if i != kept)
        if not donate:
            return None
        self._donate = (self.jit_with(donate), donate)  # one executable per program
        return self._donate

    def _mirrored(self, array: Any, num_replicas: int, index: int) -> Mirrored:
        if type(array) is not _ArrayImpl:
            return Mirrored.from_replicated(array, num_replicas)
        return Mirrored.from_replicated(array, num_replicas, self._mirrored_specs[index])  # ``_finish`` filled it

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
            return build(outs, self._mirrored_specs)
        return self.plan.build(outs, self._mirrored_specs)

    def _fill_specs(self, outs: Any) -> None:
        """The leaf spec of every Mirrored result, from the first concrete outputs."""
        specs = self._mirrored_specs
        for step in self.plan.steps:
            i = step.index
            if step.kind is LeafKind.MIRRORED and specs[i] is None and type(outs[i]) is _ArrayImpl:
                specs[i] = Mirrored.spec_of(outs[i], step.num_replicas)
        self._specs_pending = False


def split_flags(specs: list[Any]) -> list[bool]:
    return [s.kind is LeafKind.PER_REPLICA for s in specs]


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
