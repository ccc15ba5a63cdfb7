"""TensorFlow's cluster set-up calls, mapped onto ``tps.initialize``.

``tf.config.experimental_connect_to_cluster(resolver)`` connects a TensorFlow
client to remote workers; on JAX every worker runs the program itself, so
connecting means starting this process's part of the job: ``tps.initialize``.
``tf.tpu.experimental.initialize_tpu_system(resolver)`` returns the TPU
``Topology``; here it connects (if a resolver is given and JAX has not started
a multi-process job yet) and returns the topology of JAX's TPU devices.
"""

from __future__ import annotations

from typing import Any


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


def initialize_tpu_system(cluster_resolver: Any = None) -> Any:
    """Connects (when given a resolver) and returns the ``Topology`` of the job's TPU devices.

    Raises:
      RuntimeError: there are no TPU devices (CPU/GPU devices have no TPU topology).
    """
    import jax

    from tpustrategy._src.devices.topology import Topology

    if cluster_resolver is not None:
        experimental_connect_to_cluster(cluster_resolver)
    try:
        devices = jax.devices("tpu")
    except RuntimeError:
        devices = []
    if not devices:
        raise RuntimeError(
            "initialize_tpu_system: this job has no TPU devices "
            f"({len(jax.devices())} {jax.devices()[0].platform.upper()} device(s)), so there is no TPU topology "
            "to return.\nFix: on CPU or GPU, skip this call — tps.TPUStrategy() runs over the available devices, "
            "and tps.tpu.Topology(mesh_shape=...) builds a topology for device-assignment code."
        )
    return Topology.from_jax_devices(devices)


def shutdown_tpu_system(cluster_resolver: Any = None) -> None:
    """Accepted for TensorFlow compatibility: JAX releases TPUs when the process exits."""
    return None
