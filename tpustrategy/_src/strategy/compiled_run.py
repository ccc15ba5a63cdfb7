"""The compiled path of ``strategy.run``: one XLA program for every replica.

``fn`` is traced once per input signature with JAX's axis environment (the
replica axis bound, no ``shard_map`` replication types), which gives
TensorFlow's gradient semantics for free: broadcast inputs are each
replica's own copy (``jax.grad`` gives per-replica gradients) and the
transpose of an all-reduce is the same all-reduce. The traced jaxpr is then
evaluated inside ``jax.jit(jax.shard_map(...))`` over the strategy's mesh.
Because the jaxpr is known before ``shard_map`` is built, outputs that are
provably equal on every replica leave the program replicated (``Mirrored``,
no copy per replica to gather) and the rest stacked along the replica axis
(``PerReplica``).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tpustrategy._src.replica.context import CompiledReplicaContext
from tpustrategy._src.strategy import context, dispatch, invariance
from tpustrategy._src.values import regroup
from tpustrategy._src.values.distributed import DistributedValues, Mirrored, PerReplica
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS
from tpustrategy._src.variables import frames, updates

STATIC, PER_REPLICA, BROADCAST = 0, 1, 2
_CACHE_SIZE = 128


class Ragged(Exception):
    """Raised while classifying inputs: a PerReplica has components of different shapes."""


@dataclass
class _Program:
    fn: Any
    jitted: Any
    out_treedef: Any
    out_kinds: list[Any]  # per output leaf: ("static", obj) | ("varying",) | ("invariant",)
    variables: list[Any]  # read (inputs after the arguments)
    written: list[Any]  # written (outputs after the results)


def _is_array(x: Any) -> bool:
    return isinstance(x, (jax.Array, np.ndarray, np.generic))


def _signature(x: Any) -> tuple[Any, ...]:
    return (tuple(x.shape), str(x.dtype), bool(getattr(x, "weak_type", False)))


class CompiledRunner:
    """Per-strategy cache of compiled replica programs."""

    def __init__(self, strategy: Any):
        self._strategy = strategy
        self._cache: collections.OrderedDict[Any, _Program] = collections.OrderedDict()
        self._known_vars: dict[int, list[Any]] = {}
        self._eager_only: dict[int, Any] = {}
        self._created: dict[int, list[Any]] = {}
        mesh = strategy._mesh
        self._replicated = NamedSharding(mesh, P())
        self._split = NamedSharding(mesh, P(REPLICA_AXIS))

    # Inputs ----------------------------------------------------------------------
    def _classify(self, leaves: list[Any]) -> tuple[list[int], list[Any], tuple[Any, ...]]:
        kinds, dyn, key = [], [], []
        for leaf in leaves:
            if isinstance(leaf, Mirrored):
                value = leaf._primary()
                kinds.append(BROADCAST)
                dyn.append(value)
                key.append((BROADCAST,) + _signature(np.asarray(value) if not _is_array(value) else value))
            elif isinstance(leaf, DistributedValues):
                if leaf._is_ragged():
                    raise Ragged
                stacked = self.stacked(leaf)
                kinds.append(PER_REPLICA)
                dyn.append(stacked)
                key.append((PER_REPLICA,) + _signature(stacked))
            elif isinstance(leaf, jax.core.Tracer) or _is_array(leaf):
                kinds.append(BROADCAST)
                dyn.append(leaf)
                key.append((BROADCAST,) + _signature(leaf))
            else:
                kinds.append(STATIC)
                try:
                    hash(leaf)
                    key.append((STATIC, type(leaf), leaf))
                except TypeError:
                    key.append((STATIC, type(leaf), id(leaf)))
        return kinds, dyn, tuple(key)

    def stacked(self, value: DistributedValues) -> Any:
        """The ``[R, ...]`` array of a distributed value, sharded over replicas."""
        stacked = value._stacked
        if stacked is not None:
            if isinstance(stacked, jax.core.Tracer) or stacked.sharding == self._split:
                return stacked
        components = value.values
        n = self._strategy.num_replicas_in_sync
        local = len(self._strategy._local_devices)
        if len(components) != local:
            raise ValueError(
                f"strategy.run: a {type(value).__name__} has {len(components)} components but "
                f"the strategy has {local} replicas on this process.\nFix: build per-replica values with "
                "strategy.experimental_distribute_values_from_function."
            )
        if any(isinstance(c, jax.core.Tracer) for c in components):
            import jax.numpy as jnp

            return jnp.stack([jnp.asarray(c) for c in components])
        host = np.stack([np.asarray(c) for c in components])
        if jax.process_count() > 1:  # this process's rows of the global [R, ...] array
            stacked = jax.make_array_from_process_local_data(self._split, host, (n,) + host.shape[1:])
        else:
            stacked = jax.device_put(host, self._split)
        value._stacked = stacked
        return stacked

    # Tracing -------------------------------------------------------------------------
    def _build(self, fn: Any, treedef: Any, leaves: list[Any], kinds: list[int], dyn: list[Any]) -> _Program:
        created = self._created.setdefault(id(fn), [])
        known = list(self._known_vars.get(id(fn), []))
        for _ in range(8):
            program, missing = self._trace(fn, treedef, leaves, kinds, dyn, known, created)
            if not missing:
                self._known_vars[id(fn)] = known
                return program
            known += [v for v in missing if v not in known]
        raise RuntimeError(  # pragma: no cover - a function whose variable set never settles
            f"strategy.run: {getattr(fn, '__name__', fn)!r} kept reading new variables on every trace."
        )

    def _trace(self, fn: Any, treedef: Any, leaves: list[Any], kinds: list[int], dyn: list[Any],
               variables: list[Any], created: list[Any]) -> tuple[_Program | None, list[Any]]:
        strategy = self._strategy
        n = strategy.num_replicas_in_sync
        dyn_kinds = kinds_dynamic(kinds)
        avals = []
        for x, kind in zip(dyn, dyn_kinds):
            shape = tuple(x.shape[1:]) if kind == PER_REPLICA else tuple(np.shape(x))
            dtype = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
            avals.append(jax.ShapeDtypeStruct(shape, jax.dtypes.canonicalize_dtype(dtype)))
        var_avals = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in variables]
        cell: dict[str, Any] = {}

        def body(*flat_local: Any) -> list[Any]:
            dyn_local, var_local = flat_local[: len(avals)], flat_local[len(avals):]
            it = iter(dyn_local)
            full = [next(it) if k != STATIC else leaf for leaf, k in zip(leaves, kinds)]
            args, kwargs = jax.tree_util.tree_unflatten(treedef, full)
            ctx = CompiledReplicaContext(strategy)
            frame = frames.Frame("replica", dict(zip(variables, var_local)), created, strategy)
            with context.push(strategy, ctx), frames.active(frame):
                out = fn(*args, **kwargs)
            out_leaves, out_treedef = regroup.flatten(out)
            dynamic, out_kinds = [], []
            for leaf in out_leaves:
                if isinstance(leaf, jax.core.Tracer):
                    out_kinds.append(None)
                    dynamic.append(leaf)
                elif isinstance(leaf, DistributedValues) and leaf._traced is not None:
                    out_kinds.append(None)
                    dynamic.append(leaf._traced)
                else:
                    out_kinds.append(("static", leaf))
            cell.update(treedef=out_treedef, kinds=out_kinds, frame=frame, n_out=len(dynamic))
            written = [v for v in frame.written if v in variables]
            cell["written"] = written
            return dynamic + [frame.current(v) for v in written]

        closed = jax.make_jaxpr(body, axis_env=[(REPLICA_AXIS, n)])(*avals, *var_avals)
        frame = cell["frame"]
        if frame.missing:
            return None, frame.missing
        written = cell["written"]
        var_varying = [v._kind == "sync_on_read" for v in variables]
        in_varying = [k == PER_REPLICA for k in dyn_kinds] + var_varying
        out_varying = invariance.varying_outputs(closed.jaxpr, in_varying)
        n_out = cell["n_out"]
        for var, varying in zip(written, out_varying[n_out:]):
            if var._kind != "sync_on_read" and varying and n > 1:
                raise updates.none_aggregation_error(var)
        if n == 1:
            out_varying = [False] * len(out_varying)
        out_varying = out_varying[:n_out] + [v._kind == "sync_on_read" and n > 1 for v in written]
        in_split = [k == PER_REPLICA for k in dyn_kinds] + [v._kind == "sync_on_read" for v in variables]

        def program(*flat_global: Any) -> tuple[Any, ...]:
            local = [x.reshape(x.shape[1:]) if split else x for x, split in zip(flat_global, in_split)]
            outs = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *local)
            return tuple(o[None] if v else o for o, v in zip(outs, out_varying))

        in_specs = tuple(P(REPLICA_AXIS) if split else P() for split in in_split)
        out_specs = tuple(P(REPLICA_AXIS) if v else P() for v in out_varying)
        mapped = jax.shard_map(
            program, mesh=strategy._mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False
        )
        flags = iter(out_varying)
        out_kinds = [
            k if k is not None else (("varying",) if next(flags) else ("invariant",))
            for k in cell["kinds"]
        ]
        return _Program(fn, jax.jit(mapped), cell["treedef"], out_kinds, variables, written), []

    # Eager fallback ------------------------------------------------------------------------
    def needs_eager(self, fn: Any) -> bool:
        return id(fn) in self._eager_only and self._eager_only[id(fn)] is fn

    def mark_eager(self, fn: Any, error: BaseException) -> None:
        """Remembers that ``fn`` must run eagerly, and says so once."""
        import warnings

        self._eager_only[id(fn)] = fn
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        warnings.warn(
            f"strategy.run: {getattr(fn, '__qualname__', fn)!r} uses a per-replica value as a Python "
            f"value ({type(error).__name__}: {first_line}), so it cannot be compiled into one "
            "program; it now runs eagerly, one thread per replica (slower).\nFix: use jnp.where / "
            "jax.lax.cond instead of Python control flow on replica values, or call "
            "tps.config.run_functions_eagerly(True) to choose the eager path explicitly.",
            UserWarning,
            stacklevel=3,
        )

    # Calling ---------------------------------------------------------------------------
    def run(self, fn: Any, args: Any, kwargs: Any) -> Any:
        leaves, treedef = regroup.flatten((tuple(args), dict(kwargs)))
        kinds, dyn, sig = self._classify(leaves)
        key = (id(fn), treedef, sig)
        program = self._cache.get(key)
        if program is None or program.fn is not fn:
            program = self._build(fn, treedef, leaves, kinds, dyn)
            self._cache[key] = program
            if len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        var_inputs = [self._place_variable(v) for v in program.variables]
        outs = program.jitted(*self._place(dyn, kinds), *var_inputs)
        dispatch.track(outs)
        n_written = len(program.written)
        if n_written:
            for var, new in zip(program.written, outs[len(outs) - n_written:]):
                frames.set_global_value(var, new)
            outs = outs[: len(outs) - n_written]
        return self._outputs(program, outs)

    def _place_variable(self, var: Any) -> Any:
        value = frames.global_value(var)
        if isinstance(value, jax.core.Tracer):
            return value
        target = self._split if var._kind == "sync_on_read" else self._replicated
        if value.sharding != target:
            value = jax.device_put(value, target)
        return value

    def _place(self, dyn: list[Any], kinds: list[int]) -> list[Any]:
        placed = []
        for x, kind in zip(dyn, kinds_dynamic(kinds)):
            if kind == BROADCAST and not isinstance(x, jax.core.Tracer):
                if not (isinstance(x, jax.Array) and x.sharding == self._replicated):
                    x = jax.device_put(x, self._replicated)
            placed.append(x)
        return placed

    def _outputs(self, program: _Program, outs: tuple[Any, ...]) -> Any:
        n = self._strategy.num_replicas_in_sync
        it = iter(outs)
        leaves = []
        for kind in program.out_kinds:
            if kind[0] == "static":
                leaves.append(kind[1])
            elif n == 1:
                leaves.append(next(it))
            elif kind[0] == "varying":
                leaves.append(PerReplica._from_stacked(next(it), n))
            else:
                leaves.append(Mirrored._from_replicated(next(it), n))
        return jax.tree_util.tree_unflatten(program.out_treedef, leaves)


def kinds_dynamic(kinds: list[int]) -> list[int]:
    return [k for k in kinds if k != STATIC]
