"""``DeviceAssignment``: which TPU core runs each logical core of each replica.

A replicated TPU program has ``num_replicas`` copies, each using
``num_cores_per_replica`` logical cores (model parallelism). A device
assignment maps ``(replica, logical_core)`` to a physical mesh position of a
``Topology`` through its ``core_assignment`` array ``[num_replicas,
num_cores_per_replica, 4]``, and from there to a task, a TPU device ordinal and
TensorFlow's device names. ``DeviceAssignment.build`` packs replicas into the
mesh exactly as TensorFlow does (see ``placement``); ``TPUStrategy(
device_assignment=...)`` runs one replica per assignment row.

Example:
  >>> da = DeviceAssignment.build(topology, computation_shape=[1, 1, 1, 2], num_replicas=4)
  >>> da.num_replicas, da.num_cores_per_replica
  (4, 2)
  >>> [da.coordinates(r, 0)[:2] for r in range(4)]  # a ring over the 2x2 chips
  [(0, 0), (1, 0), (1, 1), (0, 1)]
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from tpustrategy._src.devices import placement
from tpustrategy._src.devices.topology import Topology


class DeviceOrderMode(enum.IntEnum):
    """How ``DeviceAssignment.build`` orders replicas and their cores.

    ``AUTO`` forms rings when a replica takes whole chips, there is no stride
    and the replicas fill the mesh, and a grid otherwise; ``RING`` insists on
    rings (an error where they are impossible); ``MESH`` always uses the grid.
    """

    AUTO = 0
    RING = 1
    MESH = 2


class DeviceAssignment:
    """Maps the logical cores of each replica to physical TPU cores.

    Mirrors ``tf.tpu.experimental.DeviceAssignment``. Prefer
    :meth:`DeviceAssignment.build`.

    Args:
      topology: the ``Topology`` the coordinates refer to.
      core_assignment: an integer array ``[num_replicas, num_cores_per_replica,
        4]``; entry ``[r, c]`` is the mesh position ``(x, y, z, core)`` of
        logical core ``c`` of replica ``r``. Every position must hold a device
        of the topology, and no position may be used twice.

    Raises:
      ValueError: ``topology`` is not a ``Topology``, the array has the wrong
        shape, or a position is outside the mesh, missing or used twice.
    """

    def __init__(self, topology: Topology, core_assignment: Any):
        if not isinstance(topology, Topology):
            raise ValueError(
                f"topology must be a Topology object, got {type(topology)}\n"
                "Fix: DeviceAssignment(tps.tpu.Topology(mesh_shape=..., device_coordinates=...), "
                "core_assignment), or DeviceAssignment.build(topology, ...)."
            )
        assignment = np.asarray(core_assignment)
        if assignment.size and not np.issubdtype(assignment.dtype, np.integer):
            raise ValueError(
                "DeviceAssignment: `core_assignment` must hold integer mesh coordinates; "
                f"got dtype {assignment.dtype}."
            )
        assignment = assignment.astype(np.int32)
        if assignment.ndim != 3:
            raise ValueError(
                f"core_assignment must be a rank 3 numpy array, got shape {assignment.shape}\n"
                "Fix: shape it [num_replicas, num_cores_per_replica, 4]; for one replica on "
                "one core that is [[[x, y, z, core]]]."
            )
        if assignment.shape[-1] != topology.mesh_rank:
            raise ValueError(
                "core_assignment.shape[-1] must have size equal to topology rank "
                f"({topology.mesh_rank}), got core_assignment.shape={assignment.shape}\n"
                "Fix: give each logical core all four mesh coordinates (x, y, z, core)."
            )
        _check_positions(topology, assignment)
        assignment.setflags(write=False)
        self._topology = topology
        self._core_assignment = assignment
        self._replicas_by_task = _replicas_by_task_and_core(topology, assignment)
        self._jax_devices: np.ndarray | None = None  # set by from_devices

    @classmethod
    def from_devices(cls, devices: Any) -> DeviceAssignment:
        """An assignment over any JAX devices: ``devices[r][c]`` runs logical core ``c`` of replica ``r``.

        Works for CPU and GPU devices (and TPU devices in an order of your choosing).
        The topology is a line of the devices in the order given: each JAX process is
        a task, holding its devices in that order.

        Args:
          devices: a ``[num_replicas][num_cores_per_replica]`` grid of distinct
            ``jax.Device`` objects (a nested list or an object array).

        Raises:
          ValueError: the grid is not rectangular, is empty, or repeats a device.
        """
        grid = np.empty((0, 0), dtype=object)
        try:
            rows = [list(row) for row in devices]
            if rows and len({len(r) for r in rows}) == 1 and rows[0]:
                grid = np.empty((len(rows), len(rows[0])), dtype=object)
                for r, row in enumerate(rows):
                    for c, d in enumerate(row):
                        grid[r, c] = d
        except TypeError:
            pass
        if grid.size == 0 or not all(hasattr(d, "process_index") and hasattr(d, "id") for d in grid.flat):
            raise ValueError(
                "DeviceAssignment.from_devices: `devices` must be a non-empty rectangular grid "
                "[num_replicas][num_cores_per_replica] of jax.Device objects. "
                f"Received: {devices!r:.200}.\nFix: e.g. np.array(jax.devices()).reshape(4, 2) for 4 "
                "replicas of 2 cores."
            )
        flat = list(grid.flat)
        if len({id(d) for d in flat}) != len(flat):
            raise ValueError(
                f"DeviceAssignment.from_devices: a device appears twice in the grid ({[str(d) for d in flat]}); "
                "every logical core needs its own device."
            )
        tasks = sorted({d.process_index for d in flat})
        per_task = {t: [d for d in flat if d.process_index == t] for t in tasks}
        if len({len(v) for v in per_task.values()}) > 1:
            raise ValueError(
                "DeviceAssignment.from_devices: every process must hold the same number of the grid's devices; "
                f"got {[len(per_task[t]) for t in tasks]} for processes {tasks}."
            )
        position = {id(d): i for i, d in enumerate(flat)}
        coordinates = [[[position[id(d)], 0, 0, 0] for d in per_task[t]] for t in tasks]
        topology = Topology(mesh_shape=[len(flat), 1, 1, 1], device_coordinates=coordinates)
        assignment = np.asarray([[[position[id(d)], 0, 0, 0] for d in row] for row in grid], np.int32)
        result = cls(topology, assignment)
        result._jax_devices = grid
        return result

    @property
    def jax_devices(self) -> np.ndarray | None:
        """The ``[replicas, cores]`` grid of JAX devices, for an assignment made by ``from_devices``."""
        return self._jax_devices

    @property
    def topology(self) -> Topology:
        """The ``Topology`` the assignment's coordinates refer to."""
        return self._topology

    @property
    def num_replicas(self) -> int:
        """The number of replicas of the computation."""
        return int(self._core_assignment.shape[0])

    @property
    def num_cores_per_replica(self) -> int:
        """The number of (logical) cores each replica uses."""
        return int(self._core_assignment.shape[1])

    @property
    def core_assignment(self) -> np.ndarray:
        """int32 ``[num_replicas, num_cores_per_replica, 4]``: each logical core's position."""
        return self._core_assignment

    def coordinates(self, replica: int, logical_core: int) -> tuple[int, ...]:
        """The mesh position ``(x, y, z, core)`` of ``logical_core`` of ``replica``."""
        self._check_indices(replica, logical_core, "coordinates")
        return tuple(int(c) for c in self._core_assignment[replica, logical_core])

    def lookup_replicas(self, task_id: int, logical_core: int) -> list[int]:
        """The replicas (sorted) whose ``logical_core`` runs on a device of task ``task_id``.

        Raises:
          ValueError: no replica has that logical core on that task.
        """
        try:
            return list(self._replicas_by_task[task_id][logical_core])
        except (KeyError, TypeError):
            tasks = sorted(self._replicas_by_task)
            raise ValueError(
                f"Can not find any replica in task: {task_id} contains logical_core: "
                f"{logical_core} \n"
                f"DeviceAssignment.lookup_replicas: the replicas live on tasks {tasks} and use "
                f"logical cores 0..{self.num_cores_per_replica - 1}."
            ) from None

    def tpu_ordinal(self, replica: int = 0, logical_core: int = 0) -> int:
        """The TPU device ordinal, within its task, that runs ``logical_core`` of ``replica``."""
        return self._topology.tpu_device_ordinal_at_coordinates(
            self.coordinates(replica, logical_core))

    def host_device(self, replica: int = 0, logical_core: int = 0, job: str | None = None) -> str:
        """The host CPU device of that core, e.g. ``/job:worker/task:1/device:CPU:0``."""
        return self._topology.cpu_device_name_at_coordinates(
            self.coordinates(replica, logical_core), job=job)

    def tpu_device(self, replica: int = 0, logical_core: int = 0, job: str | None = None) -> str:
        """The TPU device of that core, e.g. ``/job:worker/task:1/device:TPU:3``."""
        return self._topology.tpu_device_name_at_coordinates(
            self.coordinates(replica, logical_core), job=job)

    @classmethod
    def build(cls, topology: Topology | bytes, computation_shape: Sequence[int] | None = None,
              computation_stride: Sequence[int] | None = None, num_replicas: int = 1,
              device_order_mode: DeviceOrderMode | int = DeviceOrderMode.AUTO) -> DeviceAssignment:
        """Places ``num_replicas`` copies of a computation on ``topology``, as TensorFlow does.

        Args:
          topology: a ``Topology`` (or the bytes of a serialized ``TopologyProto``).
          computation_shape: the block of cores ``[x, y, z, core]`` one replica
            uses; default ``[1, 1, 1, 1]`` (one core).
          computation_stride: the spacing of those cores in the mesh; default
            ``[1, 1, 1, 1]``.
          num_replicas: how many replicas to place.
          device_order_mode: ``DeviceOrderMode.AUTO`` (rings where possible),
            ``RING`` or ``MESH``.

        Returns:
          A ``DeviceAssignment`` whose replica ``r``, logical core ``c`` sits where
          TensorFlow's ``DeviceAssignment.build`` puts it.

        Raises:
          ValueError: a shape or stride is malformed or not positive, the
            computation does not fit in the mesh, too many replicas are asked
            for, or ``RING`` order is impossible.
        """
        if isinstance(topology, (bytes, bytearray)):
            topology = Topology(serialized=bytes(topology))
        if not isinstance(topology, Topology):
            raise ValueError(
                f"`topology` is not a Topology object; got {type(topology)}\n"
                "Fix: DeviceAssignment.build(tps.tpu.Topology(mesh_shape=..., "
                "device_coordinates=...), ...) or Topology.from_jax_devices() on a TPU host."
            )
        mesh_shape = topology.mesh_shape
        rank = topology.mesh_rank
        shape = _block_argument(computation_shape, "computation_shape", rank)
        stride = _block_argument(computation_stride, "computation_stride", rank)
        num_replicas = _positive_int(num_replicas, "num_replicas")
        mode = _order_mode(device_order_mode)

        footprint = shape * stride
        if np.any(footprint > mesh_shape):
            raise ValueError(
                f"computation footprint {footprint} does not fit in TPU topology shape "
                f"{mesh_shape}\n"
                "DeviceAssignment.build: one replica spans computation_shape * "
                "computation_stride cores on each axis.\n"
                "Fix: use a smaller computation_shape or computation_stride on the axes "
                "that are too large."
            )
        replica_counts = (mesh_shape // footprint) * stride
        max_replicas = int(np.prod(replica_counts))
        if num_replicas > max_replicas:
            raise ValueError(
                f"requested {num_replicas} replicas but only {max_replicas} replicas with "
                f"shape {shape} and computation_stride {stride} fit in a TPU mesh of shape "
                f"{mesh_shape}\n"
                f"Fix: ask for at most {max_replicas} replicas, or a smaller computation_shape."
            )

        if topology.missing_devices.size:
            assignment = _degraded(topology, shape, stride, num_replicas)
            return cls(topology, assignment)

        replica_shape = placement.replica_grid_shape(replica_counts, num_replicas)
        rings_fit = (rank == 4 and shape[-1] == mesh_shape[-1]
                     and int(np.prod(stride)) == 1 and num_replicas == max_replicas)
        if mode == DeviceOrderMode.RING and not rings_fit:
            raise ValueError(
                "device_order_mode=DeviceOrderMode.RING is not compatible with the 3D tiling "
                "current topology.  Try setting device_order_mode=DeviceOrderMode.AUTO\n"
                "DeviceAssignment.build: rings need a computation_shape that takes every core "
                f"of its chips (last entry {int(mesh_shape[-1])}), no stride, and "
                f"num_replicas={max_replicas} (the mesh full); got computation_shape={shape}, "
                f"computation_stride={stride}, num_replicas={num_replicas}."
            )
        use_rings = rings_fit if mode == DeviceOrderMode.AUTO else mode == DeviceOrderMode.RING
        if use_rings:
            assignment = placement.ring_assignment(mesh_shape, shape, replica_shape, num_replicas)
        else:
            assignment = placement.mesh_assignment(mesh_shape, shape, stride, replica_shape,
                                                   num_replicas)
        return cls(topology, assignment)

    def __repr__(self) -> str:
        return (f"DeviceAssignment(num_replicas={self.num_replicas}, "
                f"num_cores_per_replica={self.num_cores_per_replica}, topology={self._topology!r})")

    def _check_indices(self, replica: int, logical_core: int, api: str) -> None:
        if not (0 <= replica < self.num_replicas
                and 0 <= logical_core < self.num_cores_per_replica):
            raise IndexError(
                f"DeviceAssignment.{api}: (replica={replica}, logical_core={logical_core}) is "
                f"out of range; the assignment has {self.num_replicas} replicas of "
                f"{self.num_cores_per_replica} logical cores each."
            )


def _block_argument(value: Sequence[int] | None, name: str, rank: int) -> np.ndarray:
    if value is None:
        return np.ones(rank, dtype=np.int32)
    array = np.asarray(value, dtype=np.int32)
    if array.shape != (rank,):
        raise ValueError(
            f"{name} must have shape [{rank}]; got {array.shape}\n"
            f"Fix: give DeviceAssignment.build one entry per mesh axis: {name}=[x, y, z, core]."
        )
    if np.any(array < 1):
        raise ValueError(
            f"{name} must be positive; got {name}={array}\n"
            "Fix: use 1 on the axes the computation does not span."
        )
    return array


def _positive_int(value: Any, name: str) -> int:
    try:
        number = operator.index(value)
    except TypeError:
        number = None
    if number is None or isinstance(value, bool) or number < 1:
        raise ValueError(
            f"DeviceAssignment.build: `{name}` must be a positive integer. "
            f"Received: {name}={value!r}."
        )
    return number


def _order_mode(value: Any) -> DeviceOrderMode:
    try:
        return DeviceOrderMode(value)
    except ValueError:
        raise ValueError(
            f"DeviceAssignment.build: `device_order_mode` must be one of "
            f"{[m.name for m in DeviceOrderMode]} (a tps.tpu.DeviceOrderMode). "
            f"Received: device_order_mode={value!r}."
        ) from None


def _degraded(topology: Topology, shape: np.ndarray, stride: np.ndarray,
              num_replicas: int) -> np.ndarray:
    """Task-order placement on a slice with missing chips (TF asserts these conditions)."""
    present = topology.num_tasks * topology.num_tpus_per_task
    cores_per_replica = int(np.prod(shape))
    missing = topology.missing_devices.tolist()
    if int(np.prod(stride)) != 1:
        raise ValueError(
            f"DeviceAssignment.build: the topology has {len(missing)} missing devices (e.g. at "
            f"{missing[0]}), and on such a slice replicas are placed in task order, which "
            f"cannot honour computation_stride={stride}.\n"
            "Fix: leave computation_stride at its default [1, 1, 1, 1]."
        )
    if num_replicas * cores_per_replica > present:
        raise ValueError(
            f"DeviceAssignment.build: {num_replicas} replicas of {cores_per_replica} cores need "
            f"{num_replicas * cores_per_replica} devices, but the topology has only {present} "
            f"({len(missing)} of its mesh positions are missing devices).\n"
            f"Fix: ask for at most {present // cores_per_replica} replicas."
        )
    return placement.degraded_assignment(topology.device_coordinates, cores_per_replica,
                                         num_replicas)


def _check_positions(topology: Topology, assignment: np.ndarray) -> None:
    mesh_shape = topology.mesh_shape
    rows = topology.device_coordinates.reshape(-1, topology.mesh_rank).tolist()
    present = {tuple(p) for p in rows}
    used: dict[tuple[int, ...], tuple[int, int]] = {}
    for r in range(assignment.shape[0]):
        for c in range(assignment.shape[1]):
            position = tuple(assignment[r, c].tolist())
            where = f"logical core {c} of replica {r} is at {list(position)}"
            if not all(0 <= p < n for p, n in zip(position, mesh_shape)):
                raise ValueError(
                    f"DeviceAssignment: {where}, outside the TPU mesh of shape "
                    f"{mesh_shape.tolist()}.\n"
                    "Fix: use positions from topology.device_coordinates."
                )
            if position not in present:
                raise ValueError(
                    f"DeviceAssignment: {where}, where the topology has no device (it is one "
                    "of topology.missing_devices).\n"
                    "Fix: use positions from topology.device_coordinates."
                )
            if position in used:
                r0, c0 = used[position]
                raise ValueError(
                    f"DeviceAssignment: {where}, the core already used by logical core {c0} "
                    f"of replica {r0}; a TPU core runs one logical core.\n"
                    "Fix: give every (replica, logical core) its own position."
                )
            used[position] = (r, c)


def _replicas_by_task_and_core(topology: Topology,
                               assignment: np.ndarray) -> dict[int, dict[int, list[int]]]:
    """task -> logical core -> sorted replica ids (TF's lookup table)."""
    table: dict[int, dict[int, list[int]]] = {}
    for r in range(assignment.shape[0]):
        for c in range(assignment.shape[1]):
            task = topology.task_ordinal_at_coordinates(assignment[r, c])
            table.setdefault(task, {}).setdefault(c, []).append(r)
    return table
