"""SlurmClusterResolver: the cluster of a Slurm job step, from the ``SLURM_*`` variables.

Reads ``SLURM_PROCID`` (this task), ``SLURM_STEP_NUM_TASKS`` / ``SLURM_NTASKS``,
``SLURM_STEP_NODELIST`` (e.g. ``node[001-004],gpu7``) and
``SLURM_STEP_TASKS_PER_NODE`` (e.g. ``2(x3),1``). Tasks on a node get ports
``port_base``, ``port_base + 1``, ...; task 0 hosts the coordinator.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from tpustrategy._src.cluster.base import ClusterResolver
from tpustrategy._src.cluster.cluster_spec import ClusterSpec

_NUM_TASKS = ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
_NODELIST = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
_TASKS_PER_NODE = ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p]


def expand_hostlist(hostlist: str) -> list[str]:
    """Expands a Slurm hostlist, keeping order and duplicates.

    Example:
      >>> expand_hostlist("n[1-2],m5,o[03-04,6]")
      ['n1', 'n2', 'm5', 'o03', 'o04', 'o6']
    """
    hosts: list[str] = []
    for item in _split_top_level(hostlist.strip()):
        match = re.search(r"\[([^\]]*)\]", item)
        if match is None:
            hosts.append(item)
            continue
        head, tail = item[: match.start()], item[match.end():]
        for rng in match.group(1).split(","):
            lo, _, hi = rng.partition("-")
            width = len(lo)
            for n in range(int(lo), int(hi or lo) + 1):
                hosts.extend(expand_hostlist(f"{head}{n:0{width}d}{tail}"))
    return hosts


def expand_tasks_per_node(tasks_per_node: str) -> list[int]:
    """Expands ``SLURM_STEP_TASKS_PER_NODE``.

    Example:
      >>> expand_tasks_per_node("2(x3),1")
      [2, 2, 2, 1]
    """
    counts: list[int] = []
    for part in tasks_per_node.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if match is None:
            raise ValueError(
                f"SlurmClusterResolver: cannot parse tasks per node {tasks_per_node!r}; "
                "expected e.g. '2(x3),1'."
            )
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts


def _env(names: tuple[str, ...]) -> str | None:
    return next((os.environ[n] for n in names if n in os.environ), None)


class SlurmClusterResolver(ClusterResolver):
    """The cluster of the current Slurm job step.

    Args:
      jobs: ``{job_name: num_tasks}``; default ``{"worker": <all tasks>}``.
        Tasks are assigned to jobs in the order given.
      port_base: the first port on each node; later tasks on a node count up.
      gpus_per_node: accepted for TensorFlow compatibility (JAX chooses devices).
      gpus_per_task: accepted for TensorFlow compatibility.
      tasks_per_node: ``{host: count}`` instead of ``SLURM_STEP_TASKS_PER_NODE``.
      auto_set_gpu: accepted for TensorFlow compatibility; nothing is set.
      rpc_layer: protocol prefix of ``master()`` URLs.

    Raises:
      ValueError: if the Slurm variables are missing or inconsistent.
    """

    def __init__(self, jobs: Mapping[str, int] | None = None, port_base: int = 8888,
                 gpus_per_node: int | None = None, gpus_per_task: int | None = None,
                 tasks_per_node: Mapping[str, int] | None = None, auto_set_gpu: bool = True,
                 rpc_layer: str | None = "grpc"):
        missing = [names[0] for names in (("SLURM_PROCID",), _NUM_TASKS, _NODELIST)
                   if _env(names) is None]
        if missing:
            raise ValueError(
                f"SlurmClusterResolver: environment variable(s) {', '.join(missing)} are not "
                "set, so this does not look like a Slurm job step.\n"
                "Fix: start the program with srun, or use TFConfigClusterResolver / "
                "SimpleClusterResolver / tps.initialize(coordinator_address=..., "
                "num_processes=..., process_id=...)."
            )
        rank = int(_env(("SLURM_PROCID",)))  # type: ignore[arg-type]
        num_tasks = int(_env(_NUM_TASKS))  # type: ignore[arg-type]
        hosts = expand_hostlist(_env(_NODELIST))  # type: ignore[arg-type]
        if tasks_per_node is not None:
            per_node = [int(tasks_per_node[h]) for h in hosts]
        elif _env(_TASKS_PER_NODE) is not None:
            per_node = expand_tasks_per_node(_env(_TASKS_PER_NODE))  # type: ignore[arg-type]
        else:
            per_node = [num_tasks // len(hosts)] * len(hosts)
        addresses = [f"{host}:{port_base + k}" for host, n in zip(hosts, per_node)
                     for k in range(n)]
        if len(addresses) != num_tasks:
            raise ValueError(
                f"SlurmClusterResolver: the nodes {hosts} with {per_node} task(s) each give "
                f"{len(addresses)} tasks, but {_NUM_TASKS[0]}/{_NUM_TASKS[1]} says {num_tasks}.\n"
                "Fix: pass tasks_per_node={host: count} for heterogeneous steps."
            )
        jobs = dict(jobs) if jobs is not None else {"worker": num_tasks}
        if sum(jobs.values()) != num_tasks:
            raise ValueError(
                f"SlurmClusterResolver: jobs={jobs} ask for {sum(jobs.values())} tasks, but the "
                f"Slurm step has {num_tasks}.\nFix: make the job sizes add up to {num_tasks}."
            )
        spec: dict[str, list[str]] = {}
        start = 0
        for job, count in jobs.items():
            spec[job] = addresses[start:start + count]
            if start <= rank < start + count:
                self._task_type, self._task_id = job, rank - start
            start += count
        self._spec = ClusterSpec(spec)
        self._rpc_layer = rpc_layer
        self._port_base = port_base

    def cluster_spec(self) -> ClusterSpec:
        """Returns ``{job: ["host:port", ...]}`` of the Slurm step."""
        return self._spec

    def get_task_info(self) -> tuple[str | None, int | None]:
        """Returns ``(task_type, task_id)`` of this process."""
        return self._task_type, self._task_id
