"""The concrete strategies: Mirrored, TPU, OneDevice and MultiWorkerMirrored.

Above ``base`` (and ``extended`` / ``logical_devices``, which it mixes in or names);
only ``central_storage`` imports it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import jax

from tpustrategy._src.cluster.default import default_resolver
from tpustrategy._src.devices.mesh import resolve_device, resolve_devices
from tpustrategy._src.strategy.base import Strategy
from tpustrategy._src.strategy.communication import check_cross_device_ops
from tpustrategy._src.strategy.extended import TPUStrategyExtended
from tpustrategy._src.strategy.logical_devices import LogicalDevices
from tpustrategy._src.strategy.run_arguments import check_tpu_run_arguments

logger = logging.getLogger("tpustrategy")
_logged_no_tpu = False


class MirroredStrategy(Strategy):
    """Synchronous data parallelism over the devices of this host.

    Args:
      devices: ``jax.Device`` objects or TF-style strings (``"/cpu:0"``,
        ``"/gpu:1"``); default: every local device of JAX's default backend.
      cross_device_ops: a ``tps.HierarchicalCopyAllReduce()``, ``tps.NcclAllReduce()``
        or ``tps.ReductionToOneDevice()`` (validated and logged once; XLA picks the
        all-reduce algorithm, the results are the same).
    """

    # Strategy.supports_per_replica_input: InputReplicationMode.PER_REPLICA in
    # distribute_datasets_from_function (TensorFlow: Mirrored only).
    _per_replica_input = True

    def __init__(self, devices: Sequence[Any] | None = None, cross_device_ops: Any = None):
        self._cross_device_ops = check_cross_device_ops(cross_device_ops, "MirroredStrategy")
        super().__init__(resolve_devices(devices, "MirroredStrategy"))
        self._cluster_resolver = None  # TensorFlow: a single-host strategy has no resolver


class OneDeviceStrategy(Strategy):
    """Runs everything on one device (one replica)."""

    _plain_values_from_function = True

    def __init__(self, device: Any):
        super().__init__((resolve_device(device, "OneDeviceStrategy"),))
        self._cluster_resolver = None  # TensorFlow: a single-device strategy has no resolver


class TPUStrategy(LogicalDevices, Strategy):
    """Synchronous data parallelism over every TPU core of the job.

    Without TPUs it runs over the default backend's devices (GPU or CPU) and
    logs that once.

    Args:
      tpu_cluster_resolver: a ``TPUClusterResolver`` (optional; JAX finds the
        TPU cores of a Cloud TPU VM itself).
      device_assignment: an optional ``DeviceAssignment``. With
        ``num_cores_per_replica = C > 1`` every replica spans C devices: the mesh
        has axes ``("replica", "core")``, replica functions run manual over the
        replicas and XLA partitions each replica's work over its cores
        (``experimental_split_to_logical_devices`` and friends place tensors).
      experimental_spmd_xla_partitioning: TensorFlow's switch for SPMD
        partitioning; partitioning here is always SPMD, and with it set
        ``experimental_assign_to_logical_device`` raises, as in TensorFlow.
    """

    _extended_type = TPUStrategyExtended  # one client drives every replica (TensorFlow's TPUExtended)

    def _run(self, fn: Any, args: Any, kwargs: Any, options: Any) -> Any:
        if callable(fn) and isinstance(args, (tuple, list)) and isinstance(kwargs, (dict, type(None))):
            check_tpu_run_arguments(fn, args, kwargs or {})   # TensorFlow's TPUStrategy.run refusals
        return super()._run(fn, args, kwargs, options)

    def __init__(self, tpu_cluster_resolver: Any = None, device_assignment: Any = None,
                 experimental_device_assignment: Any = None, experimental_spmd_xla_partitioning: bool = False):
        global _logged_no_tpu
        self._tpu_cluster_resolver = tpu_cluster_resolver
        self._cluster_resolver = tpu_cluster_resolver
        assignment = device_assignment if device_assignment is not None else experimental_device_assignment
        try:
            devices = jax.devices("tpu")
        except RuntimeError:
            devices = []
        _check_tpu_resolver(tpu_cluster_resolver, bool(devices))
        if not devices:
            devices = jax.devices()
            if not _logged_no_tpu:
                _logged_no_tpu = True
                logger.warning(
                    "TPUStrategy: no TPU found; running over %d %s device(s) of JAX's default "
                    "backend instead.", len(devices), devices[0].platform.upper()
                )
        grid = None
        if assignment is not None:
            grid = _devices_of_assignment(assignment, devices)
            devices = [row[0] for row in grid]
        process = jax.process_index()
        local = [d for d in devices if d.process_index == process]
        offset = next(i for i, d in enumerate(devices) if d.process_index == process)
        super().__init__(devices, replica_offset=offset, local_devices=local,
                         core_grid=grid if grid is not None and len(grid[0]) > 1 else None)
        self._device_assignment = assignment
        self._spmd = bool(experimental_spmd_xla_partitioning)
        if tpu_cluster_resolver is None:
            self._cluster_resolver = default_resolver(tpu=True)


class MultiWorkerMirroredStrategy(Strategy):
    """Synchronous data parallelism over every device of every process of the job.

    Like TensorFlow, it joins the job itself when ``TF_CONFIG`` (or the
    ``cluster_resolver``, or the launcher's ``TPS_*`` variables) describes
    several processes and JAX has not started yet; calling ``tps.initialize()``
    first, on every process, works too and sets its timeouts. With one process
    it behaves like ``MirroredStrategy``.

    Args:
      cluster_resolver: a ``tps.cluster_resolver`` resolver (default: ``TF_CONFIG``).
      communication_options: a ``tps.experimental.CommunicationOptions`` (validated; XLA
        chooses the collective implementation, so results are the same).

    Raises:
      RuntimeError: the cluster has several processes but JAX already started in
        this process as a single one (call ``tps.initialize()`` first).
    """

    def __init__(self, cluster_resolver: Any = None, communication_options: Any = None):
        from tpustrategy._src.cluster.initialize import join_for_strategy
        from tpustrategy._src.strategy.communication import check_communication_options

        self._communication_options = check_communication_options(
            communication_options, "MultiWorkerMirroredStrategy")
        join_for_strategy(cluster_resolver, api="MultiWorkerMirroredStrategy")
        devices = jax.devices()
        process = jax.process_index()
        local = [d for d in devices if d.process_index == process]
        offset = next(i for i, d in enumerate(devices) if d.process_index == process)
        super().__init__(devices, replica_offset=offset, local_devices=local)
        self._cluster_resolver = cluster_resolver if cluster_resolver is not None else default_resolver()


def _check_tpu_resolver(resolver: Any, has_tpu: bool) -> None:
    """Refuses resolvers that would silently leave the job on this host's CPU."""
    if resolver is None:
        return
    from tpustrategy._src.cluster.base import ClusterResolver

    if isinstance(resolver, str):
        raise TypeError(
            f"TPUStrategy: `tpu_cluster_resolver` must be a tps.cluster_resolver.TPUClusterResolver, not "
            f"the string {resolver!r}.\nFix: TPUStrategy(tps.cluster_resolver.TPUClusterResolver(tpu={resolver!r})), "
            "after tps.config.experimental_connect_to_cluster(resolver) on every TPU VM worker; or "
            "TPUStrategy() on a TPU VM."
        )
    if not isinstance(resolver, ClusterResolver):
        raise TypeError(
            "TPUStrategy: `tpu_cluster_resolver` must be a tps.cluster_resolver.TPUClusterResolver (or another "
            f"ClusterResolver). Received: {resolver!r} ({type(resolver).__name__})."
        )
    if has_tpu:
        return
    spec = resolver.cluster_spec().as_dict() if hasattr(resolver, "cluster_spec") else {}
    workers = [w for tasks in spec.values() for w in (tasks.values() if isinstance(tasks, dict) else tasks)]
    master = ""
    try:
        master = resolver.master() or ""
    except Exception:  # a resolver without a master address
        master = ""
    if master.startswith("grpc://") or len(workers) > jax.process_count():
        raise ValueError(
            f"TPUStrategy: the cluster resolver names TPU workers {workers or [master]}, but this process sees "
            f"no TPU devices ({len(jax.devices())} {jax.devices()[0].platform.upper()} device(s), "
            f"{jax.process_count()} process(es)). JAX cannot drive a remote TPU over gRPC the way a TensorFlow "
            "session does: the program runs on the TPU VMs themselves.\nFix: run this script on every TPU VM "
            "worker and call tps.config.experimental_connect_to_cluster(resolver) (or tps.initialize(resolver)) "
            "before building the strategy; to run on this machine's devices, call TPUStrategy() without a resolver."
        )


def _devices_of_assignment(assignment: Any, devices: list[Any]) -> list[list[Any]]:
    """The ``[replicas][cores]`` grid of devices of a ``DeviceAssignment``.

    An assignment made by ``DeviceAssignment.from_devices`` names its devices.
    Otherwise a core is named by (task, TPU ordinal within the task); task t is
    JAX process t, whose devices are numbered in ``id`` order. Without that many
    processes (fake CPU devices, one process), task t's devices are taken as the
    t-th block of ``num_tpus_per_task`` devices, modulo the device count.
    """
    num_replicas = getattr(assignment, "num_replicas", None)
    if not isinstance(num_replicas, int) or num_replicas < 1:
        raise TypeError(
            "TPUStrategy: `device_assignment` must be a tps.tpu.DeviceAssignment (with a "
            f"positive num_replicas). Received: {assignment!r}."
        )
    named = getattr(assignment, "jax_devices", None)
    if named is not None:
        return [list(row) for row in named]
    cores = assignment.num_cores_per_replica
    topology = assignment.topology
    per_task = topology.num_tpus_per_task
    by_process: dict[int, list[Any]] = {}
    for d in sorted(devices, key=lambda d: d.id):
        by_process.setdefault(d.process_index, []).append(d)
    grid = []
    for r in range(num_replicas):
        row = []
        for c in range(cores):
            task = topology.task_ordinal_at_coordinates(assignment.coordinates(r, c))
            ordinal = assignment.tpu_ordinal(r, c)
            if len(by_process) > 1 and task in by_process:
                local = by_process[task]
                row.append(local[ordinal % len(local)])
            else:
                row.append(devices[(task * per_task + ordinal) % len(devices)])
        grid.append(row)
    flat = [d for row in grid for d in row]
    if len(set(flat)) != len(flat):
        raise ValueError(
            f"TPUStrategy: the device assignment asks for {num_replicas} replicas x {cores} cores but only "
            f"{len(devices)} devices are available (logical cores would share a device).\nFix: build the "
            "assignment with num_replicas * num_cores_per_replica <= the number of devices."
        )
    return grid
