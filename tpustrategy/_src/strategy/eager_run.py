"""The eager path of ``strategy.run``: one Python thread per replica.

Used for ragged per-replica inputs (the partial last batch) and when
``tps.config.run_functions_eagerly(True)``. Each thread runs ``fn`` on its own
replica's device with that replica's components of the arguments; the
collectives of ``EagerReplicaContext`` synchronise the threads
(TensorFlow MirroredStrategy semantics). The threads run concurrently, so a
replica that never reaches a collective the others wait at is detected.
"""

from __future__ import annotations

import threading
from typing import Any

import jax
import numpy as np

from tpustrategy._src import config
from tpustrategy._src.replica.context import EagerReplicaContext
from tpustrategy._src.replica.rendezvous import MISMATCH_MESSAGE, Rendezvous
from tpustrategy._src.strategy import context
from tpustrategy._src.values import regroup


def _to_device(x: Any, device: Any) -> Any:
    if isinstance(x, (jax.Array, np.ndarray, np.generic)) and not isinstance(x, jax.core.Tracer):
        if isinstance(x, np.ndarray) and x.dtype == object:
            return x
        return jax.device_put(x, device)
    return x


def run_eagerly(strategy: Any, fn: Any, args: tuple, kwargs: dict) -> Any:
    devices = strategy._local_devices
    num_local = len(devices)
    offset = strategy._replica_offset
    rendezvous = Rendezvous(num_local, config.EAGER_TIMEOUT)
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
            with context.push(strategy, ctx), jax.default_device(device):
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
    for t in threads:
        t.join()
    raised = [e for e in errors if e is not None]
    if raised:
        original = [e for e in raised if not _is_secondary(e)]
        raise (original or raised)[0]
    if num_local == 1:
        return results[0]
    return regroup.regroup(results, mirrored_ids=rendezvous.invariant_token)


def _is_secondary(error: BaseException) -> bool:
    """Errors that only report another replica's failure."""
    return isinstance(error, RuntimeError) and str(error).startswith(MISMATCH_MESSAGE)
