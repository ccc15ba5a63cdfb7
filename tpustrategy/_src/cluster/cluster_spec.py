"""ClusterSpec: the jobs of a cluster and the address of each of their tasks.

An immutable ``tf.train.ClusterSpec``: a mapping from job name to the
``"host:port"`` addresses of its tasks by index (a list, or for a *sparse* job
``{task_index: address}`` with gaps, as TensorFlow allows). It compares equal to
the ``dict`` that ``as_dict()`` returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tpustrategy._src.not_provided import not_provided_member


class ClusterSpec:
    """The tasks of a cluster, by job name (``tf.train.ClusterSpec``).

    Args:
      cluster: a ``ClusterSpec``, or a mapping ``{job_name: [address, ...]}``;
        a job may also be ``{task_index: address}``, and its indices may have
        gaps (a *sparse* job, as in TensorFlow).

    Raises:
      TypeError: if ``cluster`` is not a mapping of job names to addresses.

    Example:
      >>> spec = ClusterSpec({"worker": ["10.0.0.1:2222", "10.0.0.2:2222"], "ps": {3: "10.0.0.9:2222"}})
      >>> spec.num_tasks("worker"), spec.task_address("worker", 1), spec.task_indices("ps")
      (2, '10.0.0.2:2222', [3])
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
        jobs: dict[str, dict[int, str]] = {}
        for job, tasks in cluster.items():
            if not isinstance(job, str):
                raise TypeError(f"ClusterSpec: job names must be str. Received: {job!r}.")
            if isinstance(tasks, Mapping):
                try:
                    by_index = {int(i): str(address) for i, address in tasks.items()}
                except (TypeError, ValueError):
                    raise TypeError(
                        f"ClusterSpec: the task indices of job {job!r} must be ints. Received: {list(tasks)!r}."
                    ) from None
                if any(i < 0 for i in by_index):
                    raise ValueError(f"ClusterSpec: task indices of job {job!r} must be >= 0. "
                                     f"Received: {sorted(by_index)}.")
            elif isinstance(tasks, str) or not isinstance(tasks, Sequence):
                raise TypeError(
                    f"ClusterSpec: job {job!r} must map to a list of \"host:port\" addresses. "
                    f"Received: {tasks!r}.\nFix: e.g. ClusterSpec({{{job!r}: [\"host0:2222\", "
                    "\"host1:2222\"]})."
                )
            else:
                by_index = {i: str(address) for i, address in enumerate(tasks)}
            jobs[job] = dict(sorted(by_index.items()))
        self._jobs = jobs

    @property
    def jobs(self) -> list[str]:
        """The job names, in insertion order."""
        return list(self._jobs)

    def num_tasks(self, job_name: str) -> int:
        """Returns the number of tasks of ``job_name``."""
        return len(self._job(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        """Returns the task indices of ``job_name``, sorted (``[0, ..., n - 1]`` unless the job is sparse)."""
        return list(self._job(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        """Returns the ``"host:port"`` address of one task.

        Raises:
          ValueError: if the job or the task does not exist.
        """
        tasks = self._job(job_name)
        if task_index not in tasks:
            raise ValueError(
                f"No task with index {task_index!r} in job {job_name!r} (ClusterSpec: no task {task_index} in job "
                f"{job_name!r}, which has task(s) {list(tasks)})."
            )
        return tasks[task_index]

    def job_tasks(self, job_name: str) -> list[str | None]:
        """Returns the addresses of ``job_name``'s tasks by index (``None`` where a sparse job has a gap)."""
        tasks = self._job(job_name)
        out: list[str | None] = [None] * (max(tasks) + 1 if tasks else 0)
        for i, address in tasks.items():
            out[i] = address
        return out

    def as_dict(self) -> dict[str, Any]:
        """Returns ``{job_name: [address, ...]}``; a sparse job as ``{task_index: address}``, as TensorFlow."""
        out: dict[str, Any] = {}
        for job, tasks in self._jobs.items():
            dense = not tasks or max(tasks) + 1 == len(tasks)
            out[job] = list(tasks.values()) if dense else dict(tasks)
        return out

    def _job(self, job_name: str) -> dict[int, str]:
        if job_name not in self._jobs:
            raise ValueError(
                f"No such job in cluster: {job_name!r} (ClusterSpec: no job named {job_name!r}. Jobs: {self.jobs}.)"
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
        return hash(tuple((job, tuple(tasks.items())) for job, tasks in self._jobs.items()))

    def __repr__(self) -> str:
        return f"ClusterSpec({self.as_dict()!r})"
