"""ClusterResolver: where the processes of a job are, and which one this is.

A resolver answers TensorFlow's questions (``cluster_spec()``, ``master()``,
``task_type``, ``task_id``) and the three that ``tps.initialize`` asks to call
``jax.distributed.initialize``: ``coordinator_address``, ``num_processes`` and
``process_id`` (``None`` means "not known here; let the next source decide").

For resolvers built on a TensorFlow cluster spec, the JAX job is the ``chief``
task (if any) followed by the ``worker`` tasks, in order: the chief (or worker
0) is process 0 and hosts the coordinator. ``ps`` and ``evaluator`` tasks do not
take part in a synchronous JAX job.
"""

from __future__ import annotations

import abc

from tpustrategy._src.cluster.cluster_spec import ClusterSpec

JAX_JOBS = ("chief", "worker")


def format_master_url(address: str, rpc_layer: str | None = None) -> str:
    """Returns ``rpc_layer://address`` (or ``address`` without an rpc layer)."""
    return f"{rpc_layer}://{address}" if rpc_layer else address


def jax_tasks(spec: ClusterSpec) -> list[tuple[str, int, str]]:
    """Returns ``(task_type, task_id, address)`` of the JAX processes, in process order."""
    return [
        (job, i, spec.task_address(job, i))
        for job in JAX_JOBS
        if job in spec.jobs
        for i in spec.task_indices(job)
    ]


class ClusterResolver(abc.ABC):
    """Base class of the cluster resolvers (``tf.distribute.cluster_resolver``).

    Subclasses implement ``cluster_spec()``; the JAX start-up properties are
    derived from it and from ``task_type`` / ``task_id`` unless overridden.
    """

    _task_type: str | None = None
    _task_id: int | None = None
    _rpc_layer: str | None = None
    _environment: str = ""

    @abc.abstractmethod
    def cluster_spec(self) -> ClusterSpec:
        """Returns the cluster as a ``ClusterSpec``."""

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """Returns the address of a task, with its rpc layer (``"grpc://host:port"``).

        Args:
          task_type: the job; default this resolver's ``task_type``.
          task_id: the task in the job; default this resolver's ``task_id``.
          rpc_layer: overrides the resolver's ``rpc_layer``.

        Returns:
          The address, or ``""`` when the task is unknown or the spec is empty.
        """
        task_type = self._task_type if task_type is None else task_type
        task_id = self._task_id if task_id is None else task_id
        spec = self.cluster_spec()
        if task_type is None or task_id is None or task_type not in spec.jobs:
            return ""
        return format_master_url(spec.task_address(task_type, task_id),
                                 rpc_layer or self._rpc_layer)

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: object = None) -> dict[str, int]:
        """Returns ``{"TPU"|"GPU": count}`` for this host's accelerators (``{}`` on CPU).

        This starts JAX's backend: after it, ``tps.initialize`` can no longer
        be called.
        """
        import jax

        counts: dict[str, int] = {}
        for device in jax.local_devices():
            if device.platform != "cpu":
                key = device.platform.upper()
                counts[key] = counts.get(key, 0) + 1
        return counts

    @property
    def task_type(self) -> str | None:
        """The job of this process (``"worker"``, ``"chief"``, ...)."""
        return self._task_type

    @task_type.setter
    def task_type(self, task_type: str | None) -> None:
        self._task_type = task_type

    @property
    def task_id(self) -> int | None:
        """The index of this process in its job."""
        return self._task_id

    @task_id.setter
    def task_id(self, task_id: int | None) -> None:
        self._task_id = task_id

    @property
    def rpc_layer(self) -> str | None:
        """The protocol of ``master()`` URLs (``"grpc"`` or None)."""
        return self._rpc_layer

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer: str | None) -> None:
        self._rpc_layer = rpc_layer

    @property
    def environment(self) -> str:
        """The environment name (``""``, or ``"google"`` for TF_CONFIG)."""
        return self._environment

    # -- what tps.initialize needs -------------------------------------------------

    @property
    def coordinator_address(self) -> str | None:
        """``host:port`` of process 0 (the chief, else worker 0); None if unknown."""
        tasks = jax_tasks(self.cluster_spec())
        return tasks[0][2] if tasks else None

    @property
    def num_processes(self) -> int | None:
        """Number of processes of the JAX job (chief + workers); None if unknown."""
        tasks = jax_tasks(self.cluster_spec())
        return len(tasks) or None

    @property
    def process_id(self) -> int | None:
        """This process's index in the JAX job; None if unknown.

        Raises:
          ValueError: if this task is not part of the JAX job (``ps``,
            ``evaluator``) or is not in the cluster spec.
        """
        if self._task_type is None or self._task_id is None:
            return None
        tasks = jax_tasks(self.cluster_spec())
        for pid, (job, index, _) in enumerate(tasks):
            if (job, index) == (self._task_type, self._task_id):
                return pid
        name = type(self).__name__
        if self._task_type not in JAX_JOBS:
            raise ValueError(
                f"{name}: task_type={self._task_type!r} does not take part in a synchronous "
                f"JAX job; only {' and '.join(repr(j) for j in JAX_JOBS)} tasks do.\n"
                "Fix: run this task's program without tps.initialize (e.g. a separate "
                "evaluator job), or give it task_type='worker'."
            )
        raise ValueError(
            f"{name}: task {self._task_type}:{self._task_id} is not in the cluster spec "
            f"{self.cluster_spec().as_dict()}.\n"
            "Fix: make task_id smaller than the number of tasks of its job."
        )

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(cluster_spec={self.cluster_spec().as_dict()!r}, "
                f"task_type={self._task_type!r}, task_id={self._task_id!r})")
