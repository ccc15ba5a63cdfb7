"""The uniform back end: one replica trace evaluated in ``jit(shard_map)`` over the mesh.

The replica function was traced once (``trace.ReplicaView``); here its jaxpr
is evaluated inside ``jax.shard_map`` over the strategy's replica axis. The
jaxpr is known before ``shard_map`` is built, so outputs that are provably
equal on every replica (``invariance``) leave the program replicated
(``Mirrored``, ``out_specs=P()``) and the rest stacked along the replica axis
(``PerReplica``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
from jax.sharding import PartitionSpec as P

from tpustrategy._src.execution import evaluate, invariance, outputs
from tpustrategy._src.execution.program import Placement, Program, donatable_inputs, split_flags
from tpustrategy._src.execution.protocol import ReplicaStrategy
from tpustrategy._src.execution.signature import Inputs
from tpustrategy._src.execution.trace import Traced
from tpustrategy._src.values import mesh_axis
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS
from tpustrategy._src.variables import updates


def is_split_variable(var: Any) -> bool:
    return bool(var.kind == "sync_on_read")


def manual_axes(strategy: ReplicaStrategy) -> dict[str, Any]:
    """With several cores per replica, the program is manual over the replicas only:
    XLA partitions each replica's work over its cores."""
    if mesh_axis.has_cores(strategy.mesh):
        return {"axis_names": frozenset({REPLICA_AXIS})}
    return {}


def keep_layout(variables: list[Any], values: list[Any], mesh: Any) -> list[Any]:
    """Written variables split over a replica's cores stay split (a sharding constraint)."""
    out = []
    for var, value in zip(variables, values):
        spec = var.core_spec
        out.append(value if spec is None else evaluate.constrain(value, spec))
    return out


def check_written(traced: Traced, written_varying: list[bool], num_replicas: int) -> None:
    """A mirrored variable written with a value that differs per replica would diverge."""
    for var, varying in zip(traced.written, written_varying):
        if not is_split_variable(var) and varying and num_replicas > 1:
            raise updates.none_aggregation_error(var)


def output_kinds(traced: Traced, varying: list[bool]) -> list[Any]:
    flags = iter(varying)
    return [k if k.is_static else (outputs.varying() if next(flags) else outputs.INVARIANT)
            for k in traced.out_kinds]


# A varying result this small per replica also leaves as a per-device copy (see ``local_copies``).
LOCAL_COPY_BYTES = 16 * 1024


def local_copies(strategy: ReplicaStrategy, outs: list[Any], varying: list[bool]) -> list[int]:
    """Which varying results also leave as a per-device copy: each device's buffer is its own
    replica's value (``out_specs=P()``, unchecked), so ``experimental_local_results`` of the
    result — a loop logging its loss every step — costs no dispatch. One process, one core
    per replica, small values only."""
    if mesh_axis.has_cores(strategy.mesh) or jax.process_count() > 1:
        return []
    return [j for j, (aval, v) in enumerate(zip(outs, varying))
            if v and aval.size * aval.dtype.itemsize <= LOCAL_COPY_BYTES]


def over_replicas(body: Any, strategy: ReplicaStrategy, in_split: list[bool], out_split: list[bool],
                  written: list[Any], copies: Sequence[int] = (), donate: tuple[int, ...] = ()) -> Any:
    """``jit(shard_map(...))`` of a per-replica ``body(local_inputs) -> outputs`` over the replica axis.

    Inputs split over the replicas enter as this replica's slice; outputs marked
    split leave stacked ``[R, ...]``, the rest replicated. The last ``len(written)``
    outputs are written variables, kept in their layout over a replica's cores. Then,
    for each index in ``copies``, that output again as a per-device copy.
    """
    n_written = len(written)

    def program(*flat_global: Any) -> tuple[Any, ...]:
        local = [x.reshape(x.shape[1:]) if split else x for x, split in zip(flat_global, in_split)]
        outs = list(body(local))
        if n_written:
            outs = outs[: len(outs) - n_written] + keep_layout(written, outs[len(outs) - n_written:], strategy.mesh)
        return tuple(o[None] if split else o for o, split in zip(outs, out_split)) + tuple(outs[j] for j in copies)

    out_specs = tuple(P(REPLICA_AXIS) if s else P() for s in out_split) + (P(),) * len(copies)
    mapped = jax.shard_map(
        program, mesh=strategy.mesh,
        in_specs=tuple(P(REPLICA_AXIS) if s else P() for s in in_split),
        out_specs=out_specs, check_vma=False, **manual_axes(strategy),
    )
    out_shardings = None
    placement = Placement.of(strategy)
    if placement is not None and not mesh_axis.has_cores(strategy.mesh):
        # The strategy's own sharding objects: every variant of the program (donating or not)
        # returns arrays holding these very objects, so the next call finds its inputs where it
        # takes them by identity (``Program``'s ``seen``), whichever variant made them.
        out_shardings = tuple(placement.split if spec else placement.replicated for spec in out_specs)
    return jax.jit(mapped, donate_argnums=donate, out_shardings=out_shardings)


def build(traced: Traced, inputs: Inputs, strategy: ReplicaStrategy, name: str) -> Program:
    """The program of a settled replica trace."""
    n = strategy.num_replicas_in_sync
    closed = traced.closed
    dyn_split = split_flags(inputs.specs)
    in_split = dyn_split + [is_split_variable(v) for v in traced.variables]
    out_varying = invariance.varying_outputs(closed.jaxpr, in_split)
    n_out = traced.num_dynamic_outputs
    check_written(traced, out_varying[n_out:], n)
    results_varying = out_varying[:n_out] if n > 1 else [False] * n_out
    out_split = results_varying + [is_split_variable(v) for v in traced.written]

    core_mesh = strategy.mesh if mesh_axis.has_cores(strategy.mesh) else None

    # Gathers of values equal on every replica need no communication (a first-replica write
    # of a value every replica computes alike): built on each device instead.
    gathers = invariance.gathers_of_equal_values(closed.jaxpr, in_split)

    def body(local: list[Any]) -> list[Any]:
        return evaluate.eval_jaxpr(closed.jaxpr, closed.consts, *local, mesh=core_mesh, local_gathers=gathers)

    copies = local_copies(strategy, [v.aval for v in closed.jaxpr.outvars[:n_out]], results_varying)
    def jit_with(donate: tuple[int, ...] = ()) -> Any:
        return over_replicas(body, strategy, in_split, out_split, traced.written, copies, donate)

    return Program(jit_with(), Placement.of(strategy), dyn_split, traced.variables, traced.written,
                   traced.out_treedef, output_kinds(traced, results_varying), n, name,
                   one_shot=traced.one_shot, local_copies=copies, jit_with=jit_with,
                   donatable=donatable_inputs(closed, len(dyn_split), traced.variables, traced.written))
