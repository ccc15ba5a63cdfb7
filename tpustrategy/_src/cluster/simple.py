"""SimpleClusterResolver: a cluster given explicitly (``tf.distribute.cluster_resolver``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tpustrategy._src.cluster.base import ClusterResolver, format_master_url
from tpustrategy._src.cluster.cluster_spec import ClusterSpec


class SimpleClusterResolver(ClusterResolver):
    """A resolver that returns the cluster spec and task it was given.

    Args:
      cluster_spec: a ``ClusterSpec`` or ``{job: ["host:port", ...]}``.
      master: what ``master()`` returns when asked without a task.
      task_type: this process's job (``"chief"`` or ``"worker"`` for a JAX job).
      task_id: this process's index in its job.
      environment: the environment name.
      num_accelerators: ``{"TPU": n}`` style counts to report instead of asking JAX.
      rpc_layer: protocol prefix of ``master()`` URLs (e.g. ``"grpc"``).

    Example:
      >>> r = SimpleClusterResolver({"worker": ["10.0.0.1:1234", "10.0.0.2:1234"]},
      ...                           task_type="worker", task_id=1)
      >>> r.coordinator_address, r.num_processes, r.process_id
      ('10.0.0.1:1234', 2, 1)
    """

    def __init__(self, cluster_spec: ClusterSpec | Mapping[str, Any], master: str = "",
                 task_type: str | None = None, task_id: int | None = None,
                 environment: str = "", num_accelerators: Mapping[str, int] | None = None,
                 rpc_layer: str | None = None):
        self._cluster_spec = ClusterSpec(cluster_spec)
        self._master = master
        if task_id is not None and (isinstance(task_id, bool) or not isinstance(task_id, int)
                                    or task_id < 0):
            raise TypeError(
                f"SimpleClusterResolver: task_id must be a nonnegative int. Got task_id={task_id!r}.\n"
                "Fix: pass this process's index in its job, e.g. task_id=0."
            )
        self._task_type = task_type
        self._task_id = task_id
        self._environment = environment
        self._num_accelerators = dict(num_accelerators) if num_accelerators is not None else None
        self._rpc_layer = rpc_layer

    def cluster_spec(self) -> ClusterSpec:
        """Returns the cluster spec given to the constructor."""
        return self._cluster_spec

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """Returns the given task's address, else the ``master`` given to the constructor."""
        if task_type is not None and task_id is not None:
            return format_master_url(self._cluster_spec.task_address(task_type, task_id),
                                     rpc_layer or self._rpc_layer)
        return self._master

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: object = None) -> dict[str, int]:
        """Returns the counts given to the constructor, else asks JAX (see base class)."""
        if self._num_accelerators is not None:
            return dict(self._num_accelerators)
        return super().num_accelerators(task_type, task_id, config_proto)
