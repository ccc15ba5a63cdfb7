"""``Topology``: the physical TPU mesh and where each task's TPU devices sit in it.

A TPU slice is a mesh of chips with coordinates ``(x, y, z)``; a chip has one or
more cores. TensorFlow describes it with a 4-D ``mesh_shape = [x, y, z,
cores_per_chip]`` and a ``device_coordinates`` array of shape ``[tasks,
devices_per_task, 4]``: entry ``[t, d]`` is the mesh position of TPU device
``d`` of task (host) ``t``. ``Topology`` inverts that array so that a mesh
position gives back its task, its device ordinal and TensorFlow's device names
(``/job:worker/task:1/device:TPU:3``); ``DeviceAssignment`` is built on it.

The class is plain NumPy and works anywhere; :meth:`Topology.from_jax_devices`
reads the topology of the TPU devices JAX sees (``coords``, ``core_on_chip``,
``process_index``).

Example:
  >>> topology = Topology(mesh_shape=[2, 2, 1, 2], device_coordinates=[[
  ...     [0, 0, 0, 0], [0, 0, 0, 1], [1, 0, 0, 0], [1, 0, 0, 1],
  ...     [0, 1, 0, 0], [0, 1, 0, 1], [1, 1, 0, 0], [1, 1, 0, 1]]])
  >>> topology.tpu_device_name_at_coordinates([1, 1, 0, 0], job="worker")
  '/job:worker/task:0/device:TPU:6'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpustrategy._src.devices import topology_proto

MESH_RANK = 4  # (x, y, z, core on chip)

_BUILD_BY_HAND = (
    "Topology(mesh_shape=[x, y, z, cores_per_chip], "
    "device_coordinates=int32 array [tasks, devices_per_task, 4])"
)


def _tpu_device_name(job: str | None, task: int, device: int) -> str:
    prefix = "" if job is None else f"/job:{job}"
    return f"{prefix}/task:{task}/device:TPU:{device}"


def _host_device_name(job: str | None, task: int) -> str:
    prefix = "" if job is None else f"/job:{job}"
    return f"{prefix}/task:{task}/device:CPU:0"


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


class Topology:
    """Describes a set of TPU devices: the mesh shape and each device's place in it.

    Mirrors ``tf.tpu.experimental.Topology``.

    Args:
      serialized: a serialized ``TopologyProto`` (the bytes TensorFlow's
        ``initialize_tpu_system`` and :meth:`serialized` give). When given,
        ``mesh_shape`` and ``device_coordinates`` must be left out.
      mesh_shape: 4 positive integers ``[x, y, z, cores_per_chip]``.
      device_coordinates: an integer array ``[tasks, devices_per_task, 4]``;
        entry ``[t, d]`` is the mesh position of TPU device ``d`` of task ``t``.
        Every position must lie inside the mesh and hold at most one device;
        positions that hold none are ``missing_devices``.

    Raises:
      ValueError: the shapes are wrong, a position lies outside the mesh or is
        used twice, or ``serialized`` is not a well-formed ``TopologyProto``.
      TypeError: ``serialized`` is not bytes.
    """

    def __init__(self, serialized: bytes | None = None, mesh_shape: Sequence[int] | None = None,
                 device_coordinates: Any = None):
        if serialized is not None:
            if not isinstance(serialized, (bytes, bytearray, memoryview)):
                raise TypeError(
                    "Topology: `serialized` must be the bytes of a serialized TopologyProto. "
                    f"Received: serialized={type(serialized).__name__} {serialized!r:.80}.\n"
                    f"Fix: pass the arrays by keyword instead: {_BUILD_BY_HAND}."
                )
            if mesh_shape is not None or device_coordinates is not None:
                raise ValueError(
                    "Topology: pass either `serialized` or `mesh_shape` and "
                    "`device_coordinates`, not both.\n"
                    "Fix: drop `serialized`, or drop the two arrays."
                )
            self._serialized: bytes | None = bytes(serialized)
            mesh_shape, device_coordinates = _parse_serialized(self._serialized)
        else:
            self._serialized = None
            if mesh_shape is None or device_coordinates is None:
                raise ValueError(
                    "Topology: both `mesh_shape` and `device_coordinates` are required "
                    "(or a serialized TopologyProto). "
                    f"Received: mesh_shape={mesh_shape!r}, device_coordinates="
                    f"{'None' if device_coordinates is None else 'an array'}.\n"
                    f"Fix: {_BUILD_BY_HAND}, or Topology.from_jax_devices() on a TPU host."
                )
        self._mesh_shape = _readonly(_check_mesh_shape(mesh_shape))
        coordinates = _check_coordinates(device_coordinates, self._mesh_shape)
        self._device_coordinates = _readonly(coordinates)
        self._tasks, self._devices = _invert(self._device_coordinates, self._mesh_shape)
        self._missing_devices = _readonly(np.argwhere(self._tasks < 0))

    @classmethod
    def from_jax_devices(cls, devices: Sequence[Any] | None = None) -> Topology:
        """The topology of JAX TPU devices (default: ``jax.devices()``, every process's).

        A task is a JAX process (tasks numbered in ``process_index`` order) and a
        task's device ordinals follow its devices' ``id`` order, as TPU device
        ordinals do in TensorFlow. Chip coordinates are shifted so that the
        smallest is 0, so a sub-slice gives a mesh of its own size.

        Args:
          devices: TPU ``jax.Device`` objects of one slice (anything with
            ``coords``, ``core_on_chip``, ``process_index`` and ``id``).

        Returns:
          A ``Topology`` with ``mesh_shape = [x, y, z, cores_per_chip]``.

        Raises:
          ValueError: a device has no TPU coordinates (CPU and GPU devices), the
            devices span several slices, are repeated, or the processes hold
            different numbers of them.
        """
        if devices is None:
            import jax

            devices = jax.devices()
        devices = list(devices)
        if not devices:
            raise ValueError("Topology.from_jax_devices: `devices` is empty; pass TPU devices.")
        for d in devices:
            if not (hasattr(d, "coords") and hasattr(d, "core_on_chip")):
                raise ValueError(
                    f"Topology.from_jax_devices: device {d} (platform "
                    f"{getattr(d, 'platform', '?')!r}) has no TPU mesh coordinates "
                    "(`coords`, `core_on_chip`); only TPU devices have them.\n"
                    "Fix: call it on a TPU host (or pass jax.devices('tpu')), or describe the "
                    f"mesh by hand: {_BUILD_BY_HAND}."
                )
        slices = sorted({getattr(d, "slice_index", 0) for d in devices})
        if len(slices) > 1:
            raise ValueError(
                f"Topology.from_jax_devices: the devices span {len(slices)} TPU slices "
                f"(slice_index {slices}); a Topology describes one slice.\n"
                "Fix: pass the devices of one slice, e.g. "
                "[d for d in jax.devices() if d.slice_index == 0]."
            )
        if len({d.id for d in devices}) != len(devices):
            raise ValueError("Topology.from_jax_devices: `devices` lists a device more than once.")
        chips = np.array([tuple(d.coords) for d in devices], dtype=np.int64)
        if chips.ndim != 2 or chips.shape[1] != 3:
            raise ValueError(
                "Topology.from_jax_devices: expected 3-D chip coordinates (x, y, z); "
                f"device {devices[0]} has coords {tuple(devices[0].coords)}."
            )
        chips -= chips.min(axis=0)
        cores = np.array([d.core_on_chip for d in devices], dtype=np.int64)
        position = {d.id: (*chips[i], cores[i]) for i, d in enumerate(devices)}

        by_process: dict[int, list[Any]] = {}
        for d in devices:
            by_process.setdefault(d.process_index, []).append(d)
        counts = {p: len(ds) for p, ds in sorted(by_process.items())}
        if len(set(counts.values())) != 1:
            raise ValueError(
                "Topology.from_jax_devices: every task (process) must hold the same number "
                f"of TPU devices; got {counts} (process_index: count).\n"
                "Fix: pass all the TPU devices of each process, e.g. jax.devices()."
            )
        coordinates = [
            [position[d.id] for d in sorted(ds, key=lambda d: d.id)]
            for _, ds in sorted(by_process.items())
        ]
        mesh_shape = [*(chips.max(axis=0) + 1), cores.max() + 1]
        return cls(mesh_shape=[int(n) for n in mesh_shape], device_coordinates=coordinates)

    @property
    def mesh_shape(self) -> np.ndarray:
        """int32 ``[x, y, z, cores_per_chip]``: the shape of the TPU mesh, in cores."""
        return self._mesh_shape

    @property
    def mesh_rank(self) -> int:
        """The number of mesh dimensions (4)."""
        return len(self._mesh_shape)

    @property
    def device_coordinates(self) -> np.ndarray:
        """int32 ``[tasks, devices_per_task, 4]``: each task's devices' mesh positions."""
        return self._device_coordinates

    @property
    def missing_devices(self) -> np.ndarray:
        """``[n, 4]`` mesh positions that hold no device (empty for a full slice)."""
        return self._missing_devices

    @property
    def num_tasks(self) -> int:
        """The number of tasks (hosts) in the slice."""
        return int(self._device_coordinates.shape[0])

    @property
    def num_tpus_per_task(self) -> int:
        """The number of TPU devices of each task."""
        return int(self._device_coordinates.shape[1])

    def task_ordinal_at_coordinates(self, device_coordinates: Sequence[int]) -> int:
        """The task (host) that holds the TPU device at ``device_coordinates``."""
        return self._locate(device_coordinates, "task_ordinal_at_coordinates")[0]

    def tpu_device_ordinal_at_coordinates(self, device_coordinates: Sequence[int]) -> int:
        """The TPU device ordinal, within its task, of the device at ``device_coordinates``."""
        return self._locate(device_coordinates, "tpu_device_ordinal_at_coordinates")[1]

    def cpu_device_name_at_coordinates(self, device_coordinates: Sequence[int],
                                       job: str | None = None) -> str:
        """The host CPU device of that TPU device: ``/job:<job>/task:<t>/device:CPU:0``.

        With ``job=None`` the name has no ``/job:`` part.
        """
        task, _ = self._locate(device_coordinates, "cpu_device_name_at_coordinates")
        return _host_device_name(job, task)

    def tpu_device_name_at_coordinates(self, device_coordinates: Sequence[int],
                                       job: str | None = None) -> str:
        """The TPU device's name: ``/job:<job>/task:<t>/device:TPU:<ordinal>``.

        With ``job=None`` the name has no ``/job:`` part.
        """
        task, device = self._locate(device_coordinates, "tpu_device_name_at_coordinates")
        return _tpu_device_name(job, task, device)

    def serialized(self) -> bytes:
        """This topology as a serialized ``TopologyProto`` (TensorFlow can parse it)."""
        if self._serialized is None:
            self._serialized = topology_proto.serialize(topology_proto.TopologyFields(
                mesh_shape=self._mesh_shape.tolist(),
                num_tasks=self.num_tasks,
                num_tpu_devices_per_task=self.num_tpus_per_task,
                device_coordinates=self._device_coordinates.ravel().tolist(),
            ))
        return self._serialized

    def __repr__(self) -> str:
        return (f"Topology(mesh_shape={self._mesh_shape.tolist()}, num_tasks={self.num_tasks}, "
                f"num_tpus_per_task={self.num_tpus_per_task})")

    def _locate(self, device_coordinates: Sequence[int], api: str) -> tuple[int, int]:
        """(task, device ordinal) at a mesh position, with errors that say what is wrong."""
        coords = tuple(int(c) for c in np.asarray(device_coordinates).reshape(-1))
        if len(coords) != self.mesh_rank or not all(
                0 <= c < n for c, n in zip(coords, self._mesh_shape)):
            raise ValueError(
                f"Topology.{api}: coordinates {list(coords)} are not a position in the TPU "
                f"mesh of shape {self._mesh_shape.tolist()}; expected {self.mesh_rank} "
                "integers (x, y, z, core), each below the mesh size on its axis."
            )
        task = int(self._tasks[coords])
        if task < 0:
            raise ValueError(
                f"Topology.{api}: no TPU device at coordinates {list(coords)}: that position "
                "is one of the topology's missing_devices.\n"
                "Fix: use a position listed in topology.device_coordinates."
            )
        return task, int(self._devices[coords])


def _parse_serialized(serialized: bytes) -> tuple[list[int], np.ndarray]:
    try:
        fields = topology_proto.parse(serialized)
    except ValueError as e:
        raise ValueError(
            f"Topology: `serialized` is not a well-formed TopologyProto: {e}.\n"
            f"Fix: pass the bytes of Topology.serialized(), or the arrays: {_BUILD_BY_HAND}."
        ) from None
    if fields.num_tasks < 0 or fields.num_tpu_devices_per_task < 0:
        raise ValueError(
            "Topology: the serialized TopologyProto has num_tasks="
            f"{fields.num_tasks} and num_tpu_devices_per_task="
            f"{fields.num_tpu_devices_per_task}; both must be >= 0."
        )
    expected = fields.num_tasks * fields.num_tpu_devices_per_task * len(fields.mesh_shape)
    if len(fields.device_coordinates) != expected:
        raise ValueError(
            "Topology: the serialized TopologyProto's `device_coordinates` must have "
            f"num_tasks ({fields.num_tasks}) * num_tpu_devices_per_task "
            f"({fields.num_tpu_devices_per_task}) * len(mesh_shape) "
            f"({len(fields.mesh_shape)}) = {expected} entries; got "
            f"{len(fields.device_coordinates)}."
        )
    coords = np.array(fields.device_coordinates, dtype=np.int32).reshape(
        fields.num_tasks, fields.num_tpu_devices_per_task, len(fields.mesh_shape))
    return fields.mesh_shape, coords


def _check_mesh_shape(mesh_shape: Any) -> np.ndarray:
    shape = np.asarray(mesh_shape)
    if (shape.ndim != 1 or len(shape) != MESH_RANK
            or not np.issubdtype(shape.dtype, np.integer) or np.any(shape < 1)):
        raise ValueError(
            f"`mesh_shape` must be a sequence of {MESH_RANK} positive entries; got {shape}\n"
            "Fix: give Topology(mesh_shape=[x, y, z, cores_per_chip]) in cores, e.g. "
            "[2, 2, 1, 2] for a v3-8 (2x2 chips with 2 cores each) or [2, 2, 1, 1] for a v4-8."
        )
    return shape.astype(np.int32)


def _check_coordinates(device_coordinates: Any, mesh_shape: np.ndarray) -> np.ndarray:
    coords = np.asarray(device_coordinates)
    if coords.ndim != 3 or coords.shape[2] != len(mesh_shape):
        raise ValueError(
            "`device_coordinates` must be a rank 3 int32 array with minor dimension equal "
            f"to the mesh shape rank; got shape {coords.shape} for mesh rank {len(mesh_shape)}\n"
            "Fix: shape Topology's `device_coordinates` [tasks, devices_per_task, 4], one "
            "(x, y, z, core) row per device."
        )
    if coords.size and not np.issubdtype(coords.dtype, np.integer):
        raise ValueError(
            f"Topology: `device_coordinates` must hold integers; got dtype {coords.dtype}."
        )
    coords = coords.astype(np.int32)
    outside = np.argwhere(np.any((coords < 0) | (coords >= mesh_shape), axis=-1))
    if len(outside):
        t, d = outside[0]
        raise ValueError(
            f"Topology: device {d} of task {t} has coordinates {coords[t, d].tolist()}, "
            f"outside the mesh of shape {mesh_shape.tolist()}.\n"
            "Fix: make every coordinate non-negative and below the mesh size on its axis, "
            "or enlarge `mesh_shape`."
        )
    return coords


def _invert(coords: np.ndarray, mesh_shape: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mesh position -> task and mesh position -> device ordinal (-1 where none)."""
    tasks = np.full(mesh_shape, -1, dtype=np.int32)
    devices = np.full(mesh_shape, -1, dtype=np.int32)
    seen: dict[tuple[int, ...], tuple[int, int]] = {}
    for t in range(coords.shape[0]):
        for d in range(coords.shape[1]):
            position = tuple(coords[t, d].tolist())
            if position in seen:
                t0, d0 = seen[position]
                raise ValueError(
                    f"Topology: device {d0} of task {t0} and device {d} of task {t} both "
                    f"have coordinates {list(position)}; each mesh position holds one device.\n"
                    "Fix: give every device its own (x, y, z, core) position."
                )
            seen[position] = (t, d)
            tasks[position] = t
            devices[position] = d
    return _readonly(tasks), _readonly(devices)
