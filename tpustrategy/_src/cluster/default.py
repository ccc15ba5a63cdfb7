"""The resolver a strategy builds when none is given (``strategy.cluster_resolver``).

TensorFlow's multi-worker strategies always hold a resolver: ``TFConfigClusterResolver``
for ``MultiWorkerMirroredStrategy``, the TPU resolver for ``TPUStrategy``; code such
as ``PreemptionCheckpointHandler`` or the multi-worker tutorial's ``_is_chief``
reads ``cluster_spec()``, ``task_type`` and ``task_id`` from it. Here those two
strategies hold one (the single-host ``MirroredStrategy`` and ``OneDeviceStrategy``
have none, as in TensorFlow), found in this order:

1. ``TF_CONFIG`` with a cluster: a ``TFConfigClusterResolver``;
2. the launcher's ``TPS_NUM_PROCESSES`` / ``TPS_PROCESS_ID`` /
   ``TPS_PROCESS_ADDRESSES``, or a multi-process JAX job (JAX's own cluster
   detection): a ``SimpleClusterResolver`` with one ``worker`` task per process
   (``task_id`` = the process index; addresses from the launcher, else
   ``"process-<i>"`` placeholders);
3. otherwise one local process: ``TPUStrategy`` gets ``TPUClusterResolver("local")``
   (``task_type="worker"``, ``task_id=0``), ``MultiWorkerMirroredStrategy`` a resolver with an empty
   cluster spec and ``task_type``/``task_id`` None — what TensorFlow's
   ``MultiWorkerMirroredStrategy`` reports in a local job.

Reading the environment never starts JAX; asking JAX's process count does only
when JAX already started (a strategy exists).
"""

from __future__ import annotations

import os

from tpustrategy._src.cluster.base import ClusterResolver
from tpustrategy._src.cluster.simple import SimpleClusterResolver
from tpustrategy._src.cluster.tf_config import TFConfigClusterResolver, load_tf_config

_ENV_NUM = "TPS_NUM_PROCESSES"
_ENV_ID = "TPS_PROCESS_ID"
_ENV_ADDRESSES = "TPS_PROCESS_ADDRESSES"


def _int_env(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw.isdigit() else None


def _multi_process() -> tuple[int, int, list[str]] | None:
    """``(num_processes, process_id, addresses)`` of a job of several processes, or None."""
    import jax

    num, pid = _int_env(_ENV_NUM), _int_env(_ENV_ID)
    if num is None or pid is None:
        num, pid = jax.process_count(), jax.process_index()
    if num <= 1:
        return None
    listed = [a.strip() for a in os.environ.get(_ENV_ADDRESSES, "").split(",")]
    addresses = listed if len(listed) == num and all(listed) else [f"process-{i}" for i in range(num)]
    return num, pid, addresses


def default_resolver(tpu: bool = False) -> ClusterResolver:
    """The resolver of a strategy built without one (see the module docstring).

    Args:
      tpu: for ``TPUStrategy`` (a local job gets a ``TPUClusterResolver("local")``).
    """
    if load_tf_config().get("cluster"):
        return TFConfigClusterResolver()
    job = _multi_process()
    if job is not None:
        num, pid, addresses = job
        return SimpleClusterResolver({"worker": addresses}, task_type="worker", task_id=pid,
                                     rpc_layer="grpc")
    if tpu:
        from tpustrategy._src.cluster.tpu import TPUClusterResolver

        return TPUClusterResolver("local")
    return SimpleClusterResolver({}, task_type=None, task_id=None)
