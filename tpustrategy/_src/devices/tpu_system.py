"""What a TPU system is made of: ``TPUSystemMetadata``, ``HardwareFeature``, ``XLAOptions``.

``tf.tpu.experimental.TPUSystemMetadata`` is what
``TPUClusterResolver.get_tpu_system_metadata()`` reports: cores, hosts, cores
per host, the ``Topology`` and the devices. Here they are JAX's devices of the
job (TPUs, else the default backend's devices, as ``initialize_tpu_system``
does without a TPU). ``HardwareFeature`` says which embedding engine the chips
have (from the TPU generation JAX reports; ``UNSUPPORTED`` off TPU).
``XLAOptions`` is TensorFlow's options tuple for ``RunOptions.experimental_xla_options``:
accepted and checked; JAX always partitions with SPMD (GSPMD or Shardy per
JAX's own ``jax_use_shardy_partitioner`` flag) and pads nothing dynamically.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple


class XLAOptions(NamedTuple):
    """XLA compilation options of a TPU run (``tf.tpu.XLAOptions``).

    Args:
      use_spmd_for_xla_partitioning: partition model-parallel programs with SPMD
        (always so on JAX; False is accepted and changes nothing).
      enable_xla_dynamic_padder: TensorFlow's padding of dynamic shapes (JAX
        compiles each shape; accepted).
      use_shardy_partitioner: use the Shardy partitioner (on JAX set by the
        ``jax_use_shardy_partitioner`` flag; accepted).
    """

    use_spmd_for_xla_partitioning: bool = True
    enable_xla_dynamic_padder: bool = True
    use_shardy_partitioner: bool = False


class TPUSystemMetadata(NamedTuple):
    """The cores and hosts of a TPU system (``tf.tpu.experimental.TPUSystemMetadata``)."""

    num_cores: int
    num_hosts: int
    num_of_cores_per_host: int
    topology: Any
    devices: list[Any]


# Embedding engine by TPU generation (JAX's device_kind): V1 is TensorCore-based
# embedding (v2, v3), V2 the SparseCore (v4, v5p, v6e), with its count per chip.
_EMBEDDING_BY_KIND = (
    ("v2", "V1", 0), ("v3", "V1", 0), ("v4", "V2", 2), ("v5p", "V2", 4), ("v6", "V2", 2),
)


class HardwareFeature:
    """The TPU chips' hardware features (``tf.tpu.experimental.HardwareFeature``).

    Args:
      tpu_hardware_feature_proto: accepted for TensorFlow compatibility (ignored);
        the features come from ``device_kind`` (JAX's name of the TPU generation,
        e.g. ``"TPU v4"``; ``None`` off TPU).
    """

    class EmbeddingFeature(enum.Enum):
        """The embedding engine of the chips."""

        UNSUPPORTED = "UNSUPPORTED"
        V1 = "V1"
        V2 = "V2"

    def __init__(self, tpu_hardware_feature_proto: Any = None, *, device_kind: str | None = None):
        self._feature = HardwareFeature.EmbeddingFeature.UNSUPPORTED
        self._per_chip = 0
        kind = (device_kind or "").lower().replace(" ", "")
        if kind.startswith("tpu"):
            generation = kind[len("tpu"):]
            for prefix, feature, per_chip in _EMBEDDING_BY_KIND:
                if generation.startswith(prefix):
                    self._feature = HardwareFeature.EmbeddingFeature[feature]
                    self._per_chip = per_chip
                    break

    @property
    def embedding_feature(self) -> HardwareFeature.EmbeddingFeature:
        """The embedding engine (``UNSUPPORTED`` off TPU and on chips without one)."""
        return self._feature

    @property
    def num_embedding_devices_per_chip(self) -> int:
        """SparseCores per chip (0 without them)."""
        return self._per_chip

    def __repr__(self) -> str:
        return (f"HardwareFeature(embedding_feature={self._feature.name}, "
                f"num_embedding_devices_per_chip={self._per_chip})")


def job_devices() -> list[Any]:
    """The job's TPU devices, else the default backend's devices (as ``initialize_tpu_system``)."""
    import jax

    try:
        devices = jax.devices("tpu")
    except RuntimeError:
        devices = []
    return list(devices or jax.devices())


def system_metadata(topology: Any) -> TPUSystemMetadata:
    """``TPUSystemMetadata`` of the job's devices, with their ``topology``."""
    from tpustrategy._src.devices.logical import LogicalDevice

    devices = job_devices()
    hosts = sorted({d.process_index for d in devices})
    kind = devices[0].platform.upper()
    names, seen = [], {h: 0 for h in hosts}
    for d in sorted(devices, key=lambda d: (d.process_index, d.id)):  # ordinals count per host, as TF's
        names.append(LogicalDevice(f"/job:worker/replica:0/task:{d.process_index}/device:{kind}:{seen[d.process_index]}",
                                   kind))
        seen[d.process_index] += 1
    return TPUSystemMetadata(num_cores=len(devices), num_hosts=len(hosts),
                             num_of_cores_per_host=len(devices) // len(hosts), topology=topology, devices=names)


def hardware_feature() -> HardwareFeature:
    """``HardwareFeature`` of the job's chips."""
    devices = job_devices()
    kind = devices[0].device_kind if devices and devices[0].platform == "tpu" else None
    return HardwareFeature(device_kind=kind)
