"""The eager back end of ``strategy.run``: one Python thread per replica.

Used when ``tps.config.run_functions_eagerly(True)`` (debugging) and for
replica functions that need concrete per-replica Python values
(``if replica_id == 0:``) or that the ragged back end cannot cut. Each thread
runs ``fn`` on its own replica's device with that replica's components of the
arguments; the collectives of ``EagerReplicaContext`` synchronise the threads
(TensorFlow MirroredStrategy semantics). The threads run under
``jax.disable_jit()``, so ``lax`` loops and conditionals run as Python and a
collective inside them exchanges concrete values on every iteration. A replica that never reaches a
collective the others wait at raises ``DeadlineExceededError`` after
``TPS_EAGER_TIMEOUT`` — the main thread waits with the same bound, so a stuck
replica thread never hangs the caller.

Results are placed like the compiled back ends': per-replica arrays become
one ``[R, ...]`` array over the mesh (zero-padded with true shapes when
ragged), mirrored ones one replicated array, so they combine with any other
result.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import jax
import numpy as np

from tpustrategy._src import config
from tpustrategy._src.context import stack as context
from tpustrategy._src.errors import DeadlineExceededError
from tpustrategy._src.execution import leaves, signature
from tpustrategy._src.execution.program import Placement
from tpustrategy._src.execution.protocol import ReplicaStrategy
from tpustrategy._src.replica.context import EagerReplicaContext
from tpustrategy._src.replica.rendezvous import MISMATCH_MESSAGE, Rendezvous
from tpustrategy._src.values import mesh_axis, regroup
from tpustrategy._src.values.distributed import DistributedValues, Mirrored, PerReplica, pad_to


def _to_device(x: Any, device: Any) -> Any:
    if isinstance(x, (jax.Array, np.ndarray, np.generic)) and not isinstance(x, jax.core.Tracer):
        if isinstance(x, np.ndarray) and x.dtype == object:
            return x
        return jax.device_put(x, device)
    return x


def run_eagerly(strategy: ReplicaStrategy, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    signature.check_arguments((args, kwargs), strategy.num_replicas_in_sync, leaves.refuse_in_run)
    devices = strategy.worker_devices
    num_local = len(devices)
    offset = strategy.first_local_replica
    timeout = config.EAGER_TIMEOUT
    rendezvous = Rendezvous(num_local, timeout)
    results: list[Any] = [None] * num_local
    errors: list[BaseException | None] = [None] * num_local

    def worker(i: int) -> None:
        device = devices[i]
        ctx = EagerReplicaContext(strategy, offset + i, i, device, rendezvous)
        try:
            my_args, my_kwargs = regroup.select_replica(i, (args, kwargs))
            my_args, my_kwargs = jax.tree_util.tree_map(
                lambda x: _to_device(x, device), (my_args, my_kwargs)
            )
            # Without jit, lax loops and conditionals run as Python, so a collective
            # inside them exchanges concrete values at the rendezvous on every iteration.
            with context.push(strategy, ctx), jax.default_device(device), jax.disable_jit():
                results[i] = fn(*my_args, **my_kwargs)
        except BaseException as e:  # reported by the main thread
            errors[i] = e
        finally:
            rendezvous.finish(i)

    threads = [
        threading.Thread(target=worker, args=(i,), name=f"tps-replica-{i}", daemon=True)
        for i in range(num_local)
    ]
    for t in threads:
        t.start()
    _join(threads, rendezvous, timeout)
    raised = [e for e in errors if e is not None]
    if raised:
        original = [e for e in raised if not _is_secondary(e)]
        raise (original or raised)[0]
    if num_local == 1 and strategy.num_replicas_in_sync == 1:
        return results[0]
    grouped = regroup.regroup(results, mirrored_ids=rendezvous.invariant_token) if num_local > 1 else \
        jax.tree_util.tree_map(lambda x: PerReplica([x]), results[0])
    return place_results(strategy, grouped)


def _join(threads: list[threading.Thread], rendezvous: Rendezvous, timeout: float) -> None:
    """Waits for the replica threads; a thread stuck outside any collective is bounded too.

    The rendezvous bounds a wait at a collective; a replica that is still
    running its own code ``timeout`` seconds after every other replica has
    finished or is waiting would otherwise hang the caller.
    """
    last_progress = time.monotonic()
    alive = [t for t in threads if t.is_alive()]
    while alive:
        alive[0].join(0.05)
        now_alive = [t for t in threads if t.is_alive()]
        if len(now_alive) != len(alive) or rendezvous.progressed():
            last_progress = time.monotonic()
        alive = now_alive
        if alive and rendezvous.error is not None:
            deadline = time.monotonic() + 1.0
            for t in alive:
                t.join(max(0.0, deadline - time.monotonic()))
            alive = [t for t in threads if t.is_alive()]
            if alive:
                raise rendezvous.error
        # The rendezvous names a replica that never reaches a collective the others wait
        # at; this later bound catches one that never finishes while the others are done.
        if alive and time.monotonic() - last_progress > timeout * 1.5 + 1.0:
            waiting = rendezvous.waiting()
            stuck = sorted(i for i in (int(t.name.rsplit("-", 1)[1]) for t in alive) if i not in waiting)
            raise DeadlineExceededError(
                f"strategy.run (eager path): replica threads {stuck} made no progress for {timeout:g} s "
                "(TPS_EAGER_TIMEOUT) while the other replicas were waiting or done; the replica function "
                "may be stuck.",
                missing=tuple(stuck),
            )


def _is_secondary(error: BaseException) -> bool:
    """Errors that only report another replica's failure."""
    return isinstance(error, RuntimeError) and str(error).startswith(MISMATCH_MESSAGE)


def _on_device(x: Any, device: Any) -> Any:
    if isinstance(x, jax.Array) and x.devices() == {device}:
        return x
    return jax.device_put(np.asarray(x), device)


def place_results(strategy: ReplicaStrategy, tree: Any) -> Any:
    """Eager results placed like compiled ones: one array over the mesh per distributed leaf.

    Every device of the mesh gets its replica's component (a replica with several
    cores holds a copy on each of them).
    """
    placement = Placement.of(strategy)
    assert placement is not None  # a strategy always has a placement
    mesh = strategy.mesh
    offset = strategy.first_local_replica
    n = strategy.num_replicas_in_sync

    def shards_for(sharding: Any, pieces: list[Any]) -> list[Any]:
        out = []
        for device in sharding.addressable_devices:
            replica = mesh_axis.device_position(mesh, device)[0]
            out.append(jax.device_put(pieces[replica - offset], device))
        return out

    def place(leaf: Any) -> Any:
        if not isinstance(leaf, DistributedValues):
            return leaf
        components = leaf.values
        if not all(isinstance(c, (jax.Array, np.ndarray, np.generic)) for c in components):
            return leaf
        if any(isinstance(c, np.ndarray) and c.dtype == object for c in components):
            return leaf
        shapes = [tuple(np.shape(c)) for c in components]
        if len({len(shape) for shape in shapes}) > 1:
            # Components of different ranks (``jnp.squeeze`` of a 1-row piece) cannot share
            # one padded array: each stays on its replica's device, as in TensorFlow.
            return type(leaf)([_on_device(c, d) for c, d in zip(components, strategy.worker_devices)])
        if isinstance(leaf, Mirrored) and len(set(shapes)) == 1:
            pieces = [_on_device(c, d) for c, d in zip(components, strategy.worker_devices)]
            shards = shards_for(placement.replicated, pieces)
            return Mirrored.from_replicated(
                jax.make_array_from_single_device_arrays(shapes[0], placement.replicated, shards), n)
        target = tuple(max(d) for d in zip(*shapes)) if shapes[0] else ()
        pieces = []
        for c, d in zip(components, strategy.worker_devices):
            with jax.default_device(d):
                c = pad_to(jax.numpy.asarray(_on_device(c, d)), target, jax.numpy)
                pieces.append(jax.device_put(c.reshape((1,) + target), d))
        stacked = jax.make_array_from_single_device_arrays(
            (n,) + target, placement.split, shards_for(placement.split, pieces))
        return type(leaf).from_stacked(stacked, shapes if len(set(shapes)) > 1 else None)

    return jax.tree_util.tree_map(place, tree, is_leaf=lambda x: isinstance(x, DistributedValues))
