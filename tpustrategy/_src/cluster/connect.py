"""TensorFlow's cluster set-up calls, mapped onto ``tps.initialize``.

``tf.config.experimental_connect_to_cluster(resolver)`` connects a TensorFlow
client to remote workers; on JAX every worker runs the program itself, so
connecting means starting this process's part of the job: ``tps.initialize``.
``tf.tpu.experimental.initialize_tpu_system(resolver)`` returns the TPU
``Topology``; here it connects (if a resolver is given and JAX has not started
a multi-process job yet) and returns the topology of JAX's TPU devices — or,
without TPUs, a TPU-shaped topology of the GPU/CPU devices, logged once.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("tpustrategy")


def _is_started() -> bool:
    from tpustrategy._src.jax_shims import coordination

    return coordination.is_initialized()


def experimental_connect_to_cluster(cluster_spec_or_resolver: Any, job_name: str = "localhost",
                                    task_index: int = 0, protocol: str | None = None,
                                    make_master_device_default: bool = True,
                                    cluster_device_filters: Any = None) -> Any:
    """Starts this process's part of the job described by a resolver or ``ClusterSpec``.

    Args:
      cluster_spec_or_resolver: a ``tps.cluster_resolver`` resolver or a ``ClusterSpec``.
      job_name: with a ``ClusterSpec``, this process's job (task type).
      task_index: with a ``ClusterSpec``, this process's index in its job.
      protocol, make_master_device_default, cluster_device_filters: accepted
        for TensorFlow compatibility (JAX's coordination service uses gRPC).

    Returns:
      What ``tps.initialize`` returns (the resolved ``ClusterConfig``), or None
      when the job was already started.
    """
    from tpustrategy._src.cluster.base import ClusterResolver
    from tpustrategy._src.cluster.cluster_spec import ClusterSpec
    from tpustrategy._src.cluster.initialize import initialize
    from tpustrategy._src.cluster.simple import SimpleClusterResolver

    if isinstance(cluster_spec_or_resolver, ClusterSpec):
        jobs = list(cluster_spec_or_resolver.as_dict())
        if job_name not in jobs:
            if len(jobs) != 1:
                raise ValueError(
                    f"tps.config.experimental_connect_to_cluster: job_name={job_name!r} is not a job of the cluster "
                    f"spec (jobs: {jobs}). On JAX every worker runs the program itself, so this process must be one "
                    "of the spec's tasks.\nFix: pass job_name= and task_index= naming this process's task."
                )
            job_name = jobs[0]  # TensorFlow's default "localhost" client job: this process is that job's task
        resolver = SimpleClusterResolver(cluster_spec_or_resolver, task_type=job_name, task_id=task_index)
    elif isinstance(cluster_spec_or_resolver, ClusterResolver):
        resolver = cluster_spec_or_resolver
    else:
        raise TypeError(
            "tps.config.experimental_connect_to_cluster: `cluster_spec_or_resolver` must be a "
            "tps.cluster_resolver resolver or a ClusterSpec. "
            f"Received: {cluster_spec_or_resolver!r} ({type(cluster_spec_or_resolver).__name__})."
        )
    if _is_started():
        return None
    return initialize(resolver)


def experimental_connect_to_host(remote_host: str | list[str] | None = None, job_name: str = "worker") -> Any:
    """Connects to the hosts of one job (``tf.config.experimental_connect_to_host``).

    The same as ``experimental_connect_to_cluster(ClusterSpec({job_name: remote_host}))``:
    this process is task 0 of that job unless the job starts it otherwise.

    Raises:
      ValueError: no ``remote_host``.
    """
    from tpustrategy._src.cluster.cluster_spec import ClusterSpec

    if not remote_host:
        raise ValueError("tps.config.experimental_connect_to_host: Must provide at least one remote_host "
                         f"(received remote_host={remote_host!r}).\nFix: pass 'host:port' or a list of them.")
    hosts = [remote_host] if isinstance(remote_host, str) else list(remote_host)
    return experimental_connect_to_cluster(ClusterSpec({job_name: hosts}), job_name=job_name)


_logged_no_tpu = False


def _host_topology(devices: list[Any]) -> Any:
    """A TPU-shaped ``Topology`` of non-TPU devices: one "chip" per device in a line.

    ``mesh_shape = [n, 1, 1, 1]``; task ``t`` (JAX process ``t``) holds its
    devices in ``id`` order, at x coordinates following those of the tasks before.
    """
    import numpy as np

    from tpustrategy._src.devices.topology import Topology

    by_task: dict[int, list[Any]] = {}
    for d in sorted(devices, key=lambda d: (d.process_index, d.id)):
        by_task.setdefault(d.process_index, []).append(d)
    per_task = {len(v) for v in by_task.values()}
    if len(per_task) != 1:
        raise ValueError(
            "initialize_tpu_system: the processes hold different numbers of devices "
            f"({ {t: len(v) for t, v in by_task.items()} }), which a Topology cannot describe.")
    count = per_task.pop()
    coordinates = np.array([[[t * count + i, 0, 0, 0] for i in range(count)]
                            for t in range(len(by_task))], np.int32)
    return Topology(mesh_shape=[len(devices), 1, 1, 1], device_coordinates=coordinates)


def initialize_tpu_system(cluster_resolver: Any = None) -> Any:
    """Connects (when given a resolver) and returns the ``Topology`` of the job's devices.

    With TPUs, their real topology. Without (GPU or CPU), it logs that once and
    returns a TPU-shaped topology of the available devices — each device one
    "chip" of one core, in a line (``mesh_shape = [n, 1, 1, 1]``) — so the TPU
    guide's first cells run unchanged, and ``DeviceAssignment.build(topology)``
    places replicas on those devices.
    """
    global _logged_no_tpu
    import jax

    from tpustrategy._src.devices.topology import Topology

    if cluster_resolver is not None:
        experimental_connect_to_cluster(cluster_resolver)
    try:
        devices = jax.devices("tpu")
    except RuntimeError:
        devices = []
    if devices:
        return Topology.from_jax_devices(devices)
    devices = jax.devices()
    if not _logged_no_tpu:
        _logged_no_tpu = True
        logger.warning(
            "initialize_tpu_system: no TPU found; returning a topology of the %d %s device(s) of "
            "JAX's default backend (mesh_shape [%d, 1, 1, 1]: one core per device).",
            len(devices), devices[0].platform.upper(), len(devices))
    return _host_topology(devices)


def shutdown_tpu_system(cluster_resolver: Any = None) -> None:
    """Accepted for TensorFlow compatibility: JAX releases TPUs when the process exits."""
    return None
