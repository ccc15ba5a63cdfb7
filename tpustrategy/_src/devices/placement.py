"""Packing replicas of a block-shaped computation into a TPU mesh (TensorFlow's rules).

``DeviceAssignment.build`` places ``num_replicas`` copies of a computation that
uses a ``computation_shape`` block of cores (``[x, y, z, core]``, cores spaced
``computation_stride`` apart) into the mesh. The result must match TensorFlow
core for core, because replica ``r`` of a TF program and of ours must sit on the
same chips (``tensorflow/python/tpu/device_assignment.py``):

* **Replica grid.** The replicas form a grid ``replica_shape`` close to a cube:
  axes are visited from the one with the fewest free slots to the most, ties
  broken core axis first, then x, y, z; each axis takes
  ``ceil(remaining ** (1 / axes_left))`` slots (TF's floating-point root,
  kept as is so that e.g. 27 replicas round the same way).
* **Mesh order.** Replica ``r`` is the mixed-radix number ``r`` with the core
  axis fastest, then x, y, z; its block starts at that grid position, scaled by
  the footprint. Logical cores run through the block in row-major
  ``(x, y, z, core)`` order.
* **Ring order.** When a computation takes every core of its chips, has no
  stride and the replicas fill the mesh (or ``DeviceOrderMode.RING``), both the
  replicas' chips and each replica's chips follow a ring through the 3-D grid,
  so neighbours in replica order are neighbours on the torus.
* **Degraded slices** (``missing_devices``): replicas take the present devices
  in task order, ignoring the block shape.

All functions here are pure NumPy over plain arrays.
"""

from __future__ import annotations

import math

import numpy as np

Chip = tuple[int, int, int]


def replica_grid_shape(replica_counts: np.ndarray, num_replicas: int) -> list[int]:
    """The replica grid: per axis, how many replicas are laid side by side.

    Args:
      replica_counts: per axis, how many replica positions the mesh offers.
      num_replicas: how many replicas to place (at most ``prod(replica_counts)``).
    """
    rank = len(replica_counts)
    # Most constrained axis first so that no choice is infeasible; among equals
    # the core axis (both cores of a chip before two chips), then x, y, z
    # (neighbouring replicas on one host when possible).
    order = sorted(range(rank), key=lambda i: (int(replica_counts[i]), (i + 1) % rank))
    shape = [0] * rank
    remaining = num_replicas
    for axes_left, axis in zip(range(rank, 0, -1), order):
        target = math.ceil(remaining ** (1.0 / axes_left))
        shape[axis] = min(target, int(replica_counts[axis]))
        remaining = -(-remaining // shape[axis])
    if remaining != 1:  # TF asserts the same; unreachable when num_replicas fits
        raise RuntimeError(
            f"internal error: replica grid {shape} leaves {remaining} replicas unplaced "
            f"(replica_counts={list(replica_counts)}, num_replicas={num_replicas})"
        )
    return shape


def mesh_assignment(mesh_shape: np.ndarray, computation_shape: np.ndarray,
                    computation_stride: np.ndarray, replica_shape: list[int],
                    num_replicas: int) -> np.ndarray:
    """``[num_replicas, cores_per_replica, 4]`` coordinates in mesh (grid) order."""
    footprint = computation_shape * computation_stride
    # Mixed radix with the core axis fastest, then x, y, z.
    z, y, x, core = np.unravel_index(
        np.arange(num_replicas),
        (replica_shape[2], replica_shape[1], replica_shape[0], replica_shape[3]))
    replica_pos = np.stack([x, y, z, core], axis=-1)
    offsets = (replica_pos // computation_stride) * footprint + replica_pos % computation_stride
    axes = [np.arange(0, n * s, s) for n, s in zip(computation_shape, computation_stride)]
    block = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(mesh_shape))
    return offsets[:, None, :] + block[None, :, :]


def ring_assignment(mesh_shape: np.ndarray, computation_shape: np.ndarray,
                    replica_shape: list[int], num_replicas: int) -> np.ndarray:
    """``[num_replicas, cores_per_replica, 4]`` coordinates in ring order.

    Needs ``computation_shape[-1] == mesh_shape[-1]``: a replica owns whole chips.
    """
    cores_per_chip = int(mesh_shape[-1])
    outer = np.array(ring_3d(*replica_shape[:3]), dtype=np.int64)[:num_replicas]
    inner = np.array(ring_3d(*(int(n) for n in computation_shape[:3])), dtype=np.int64)
    index = np.arange(int(np.prod(computation_shape)))
    chips = outer[:, None, :] * computation_shape[:3] + inner[index // cores_per_chip][None]
    core = np.broadcast_to(index % cores_per_chip, chips.shape[:2])
    return np.concatenate([chips, core[..., None]], axis=-1)


def degraded_assignment(device_coordinates: np.ndarray, cores_per_replica: int,
                        num_replicas: int) -> np.ndarray:
    """Replicas over the present devices of a slice with holes, in task order."""
    flat = device_coordinates.reshape(-1, device_coordinates.shape[-1])
    return flat[:num_replicas * cores_per_replica].reshape(num_replicas, cores_per_replica, -1)


def open_ring_2d(x_size: int, y_size: int, z: int) -> list[Chip]:
    """A ring through an ``x_size`` by ``y_size`` plane, without its start chip ``(0, 0)``.

    The ring snakes through columns 1.. in pairs of rows and comes back up
    column 0; for a 4x4 plane the visiting order is::

        0  1  2  3
        15 6  5  4
        14 7  8  9
        13 12 11 10
    """
    ring: list[Chip] = []
    for pair in range(y_size // 2):
        ring += [(x, 2 * pair, z) for x in range(1, x_size)]
        ring += [(x, 2 * pair + 1, z) for x in range(x_size - 1, 0, -1)]
    ring += [(0, y, z) for y in range(y_size - 1, 0, -1)]
    return ring


def ring_3d(x_size: int, y_size: int, z_size: int) -> list[Chip]:
    """A ring through an ``x_size`` by ``y_size`` by ``z_size`` grid of chips from ``(0, 0, 0)``.

    Planes of constant z are 2-D rings, walked alternately forwards and
    backwards and joined at column ``(0, 0)``, which is walked back down at
    the end. A grid with one non-trivial axis is a line; a grid with an odd
    axis (never a real TPU slice) falls back to x-fastest row-major order.
    """
    sizes = (x_size, y_size, z_size)
    if sum(n > 1 for n in sizes) <= 1:
        axis = next((i for i, n in enumerate(sizes) if n > 1), 0)
        unit = np.eye(3, dtype=np.int64)[axis]
        return [(int(a), int(b), int(c)) for a, b, c in np.outer(range(sizes[axis]), unit)]
    if any(n > 1 and n % 2 for n in sizes):
        return [(x, y, z) for z in range(z_size) for y in range(y_size) for x in range(x_size)]
    ring: list[Chip] = [(0, 0, 0)]
    if z_size == 1:
        return ring + open_ring_2d(x_size, y_size, 0)
    if y_size == 1:  # the plane is (x, z)
        return ring + [(a, 0, b) for a, b, _ in open_ring_2d(x_size, z_size, 0)]
    if x_size == 1:  # the plane is (y, z)
        return ring + [(0, a, b) for a, b, _ in open_ring_2d(y_size, z_size, 0)]
    for z in range(z_size):
        plane = open_ring_2d(x_size, y_size, z)
        ring += plane if z % 2 == 0 else plane[::-1]
    return ring + [(0, 0, z) for z in range(z_size - 1, 0, -1)]
