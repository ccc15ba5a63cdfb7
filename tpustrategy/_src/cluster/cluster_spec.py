"""ClusterSpec: the jobs of a cluster and the address of each of their tasks.

A small, immutable stand-in for ``tf.train.ClusterSpec``: a mapping from job
name to a list of ``"host:port"`` addresses (task ``i`` of the job is entry
``i``). It compares equal to the ``dict`` that ``as_dict()`` returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tpustrategy._src.not_provided import not_provided_member


class ClusterSpec:
    """The tasks of a cluster, by job name.

    Args:
      cluster: a ``ClusterSpec``, or a mapping ``{job_name: [address, ...]}``
        (a mapping ``{task_index: address}`` per job is accepted too, as in
        TensorFlow).

    Raises:
      TypeError: if ``cluster`` is not a mapping of job names to addresses.

    Example:
      >>> spec = ClusterSpec({"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]})
      >>> spec.num_tasks("worker"), spec.task_address("worker", 1)
      (2, '10.0.0.2:2222')
    """

    def __init__(self, cluster: ClusterSpec | Mapping[str, Any] | None = None):
        if isinstance(cluster, ClusterSpec):
            cluster = cluster.as_dict()
        if cluster is None:
            cluster = {}
        if not isinstance(cluster, Mapping):
            raise TypeError(
                "ClusterSpec(cluster=...) expects a mapping {job_name: [\"host:port\", ...]}. "
                f"Received: {cluster!r}."
            )
        jobs: dict[str, tuple[str, ...]] = {}
        for job, tasks in cluster.items():
            if not isinstance(job, str):
                raise TypeError(f"ClusterSpec: job names must be str. Received: {job!r}.")
            if isinstance(tasks, Mapping):
                indices = sorted(int(i) for i in tasks)
                if indices != list(range(len(indices))):
                    raise ValueError(
                        f"ClusterSpec: the task indices of job {job!r} must be 0..n-1 "
                        f"without gaps. Received: {indices}."
                    )
                tasks = [tasks[i] if i in tasks else tasks[str(i)] for i in indices]
            if isinstance(tasks, str) or not isinstance(tasks, Sequence):
                raise TypeError(
                    f"ClusterSpec: job {job!r} must map to a list of \"host:port\" addresses. "
                    f"Received: {tasks!r}.\nFix: e.g. ClusterSpec({{{job!r}: [\"host0:2222\", "
                    "\"host1:2222\"]})."
                )
            jobs[job] = tuple(str(t) for t in tasks)
        self._jobs = jobs

    @property
    def jobs(self) -> list[str]:
        """The job names, in insertion order."""
        return list(self._jobs)

    def num_tasks(self, job_name: str) -> int:
        """Returns the number of tasks of ``job_name``."""
        return len(self._job(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        """Returns ``[0, ..., num_tasks - 1]`` for ``job_name``."""
        return list(range(self.num_tasks(job_name)))

    def task_address(self, job_name: str, task_index: int) -> str:
        """Returns the ``"host:port"`` address of one task.

        Raises:
          ValueError: if the job or the task does not exist.
        """
        tasks = self._job(job_name)
        if not 0 <= task_index < len(tasks):
            raise ValueError(
                f"ClusterSpec: no task {task_index} in job {job_name!r}, which has "
                f"{len(tasks)} task(s)."
            )
        return tasks[task_index]

    def job_tasks(self, job_name: str) -> list[str]:
        """Returns the addresses of the tasks of ``job_name``."""
        return list(self._job(job_name))

    def as_dict(self) -> dict[str, list[str]]:
        """Returns ``{job_name: [address, ...]}``."""
        return {job: list(tasks) for job, tasks in self._jobs.items()}

    def _job(self, job_name: str) -> tuple[str, ...]:
        if job_name not in self._jobs:
            raise ValueError(
                f"ClusterSpec: no job named {job_name!r}. Jobs: {self.jobs}."
            )
        return self._jobs[job_name]

    as_cluster_def = not_provided_member("tf.train.ClusterSpec.as_cluster_def")

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ClusterSpec):
            return self._jobs == other._jobs
        if isinstance(other, Mapping):
            try:
                return self._jobs == ClusterSpec(other)._jobs
            except (TypeError, ValueError):
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._jobs.items()))

    def __repr__(self) -> str:
        return f"ClusterSpec({self.as_dict()!r})"
