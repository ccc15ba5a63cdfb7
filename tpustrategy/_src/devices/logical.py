"""``tf.config`` device listing and logical-device configuration, on JAX.

TensorFlow scripts start with ``tf.config.list_physical_devices("CPU")`` and
``tf.config.set_logical_device_configuration(cpu, [LogicalDeviceConfiguration()] * 8)``
to get several CPU devices. On JAX the number of CPU devices is the
``jax_num_cpu_devices`` setting, which must be set before JAX starts its
backends; so listing *CPU* physical devices does not start JAX (there is one
physical CPU), and configuring them after JAX started raises TensorFlow's
``RuntimeError``. Logical devices are JAX's devices (``jax.devices()``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

_TYPES = {"CPU": "cpu", "GPU": "gpu", "TPU": "tpu"}


class PhysicalDevice(NamedTuple):
    """``tf.config.PhysicalDevice``."""

    name: str
    device_type: str


class LogicalDevice(NamedTuple):
    """``tf.config.LogicalDevice``."""

    name: str
    device_type: str


@dataclasses.dataclass(frozen=True)
class LogicalDeviceConfiguration:
    """``tf.config.LogicalDeviceConfiguration`` (memory limits are accepted; JAX does not split devices)."""

    memory_limit: int | None = None
    experimental_priority: int | None = None
    experimental_device_ordinal: int | None = None


def _backends_started() -> bool:
    from tpustrategy._src.jax_shims import backend

    return backend.backends_started()


def _check_type(device_type: Any, api: str) -> str | None:
    if device_type is None:
        return None
    if not isinstance(device_type, str) or device_type.upper() not in _TYPES:
        raise ValueError(
            f"tps.config.{api}: `device_type` must be None or one of {sorted(_TYPES)}. "
            f"Received: device_type={device_type!r}.\nFix: pass 'CPU', 'GPU' or 'TPU' (any case), or None for all."
        )
    return device_type.upper()


def _jax_devices(kind: str) -> list[Any]:
    import jax

    try:
        return list(jax.devices(_TYPES[kind]))
    except RuntimeError:  # no such backend
        return []


def list_physical_devices(device_type: str | None = None) -> list[PhysicalDevice]:
    """Physical devices of this host (``tf.config.list_physical_devices``).

    Listing CPUs before JAX has started does not start it, so
    ``set_logical_device_configuration`` can still follow.
    """
    kind = _check_type(device_type, "list_physical_devices")
    out = []
    if kind in (None, "CPU"):
        out.append(PhysicalDevice("/physical_device:CPU:0", "CPU"))
    if kind == "CPU" or (kind is None and not _backends_started()):
        return out
    for other in ("GPU", "TPU"):
        if kind in (None, other):
            out += [PhysicalDevice(f"/physical_device:{other}:{i}", other)
                    for i, _ in enumerate(_jax_devices(other))]
    return out


def list_logical_devices(device_type: str | None = None) -> list[LogicalDevice]:
    """JAX's devices as TensorFlow logical devices (``tf.config.list_logical_devices``)."""
    kind = _check_type(device_type, "list_logical_devices")
    out = []
    for name in ("CPU", "GPU", "TPU"):
        if kind in (None, name):
            out += [LogicalDevice(f"/device:{name}:{i}", name) for i, _ in enumerate(_jax_devices(name))]
    return out


def set_logical_device_configuration(device: Any, logical_devices: Any) -> None:
    """Splits the CPU into ``len(logical_devices)`` devices (``jax_num_cpu_devices``).

    Args:
      device: a CPU ``PhysicalDevice`` from ``list_physical_devices("CPU")``.
      logical_devices: a list of ``LogicalDeviceConfiguration``.

    Raises:
      RuntimeError: JAX has already started (TensorFlow's "cannot be modified" error).
      ValueError: a GPU/TPU device (JAX cannot split them) or an empty list.
    """
    if not isinstance(device, PhysicalDevice):
        raise TypeError(
            "tps.config.set_logical_device_configuration: `device` must be a PhysicalDevice from "
            f"tps.config.list_physical_devices(). Received: {device!r}."
        )
    if device.device_type != "CPU":
        raise ValueError(
            f"tps.config.set_logical_device_configuration: JAX cannot split a {device.device_type} into logical "
            "devices; only the CPU can be configured (as N CPU devices).\nFix: use the GPUs/TPUs as they are, "
            "one replica per device."
        )
    configs = list(logical_devices)
    if not configs or not all(isinstance(c, LogicalDeviceConfiguration) for c in configs):
        raise ValueError(
            "tps.config.set_logical_device_configuration: `logical_devices` must be a non-empty list of "
            f"tps.config.LogicalDeviceConfiguration. Received: {logical_devices!r}."
        )
    import jax

    if _backends_started():
        if len(jax.devices("cpu")) == len(configs):
            return
        raise RuntimeError(
            "Virtual devices cannot be modified after being initialized: JAX has already started with "
            f"{len(jax.devices('cpu'))} CPU device(s), and {len(configs)} were asked for.\nFix: call "
            "tps.config.set_logical_device_configuration before anything runs on JAX (right after the "
            "imports), or set XLA_FLAGS=--xla_force_host_platform_device_count=N before starting Python."
        )
    jax.config.update("jax_num_cpu_devices", len(configs))


def get_logical_device_configuration(device: Any) -> list[LogicalDeviceConfiguration] | None:
    """The CPU's logical configuration when more than one CPU device is configured."""
    import jax

    if not isinstance(device, PhysicalDevice) or device.device_type != "CPU":
        return None
    count = len(jax.devices("cpu")) if _backends_started() else jax.config.jax_num_cpu_devices
    return [LogicalDeviceConfiguration() for _ in range(count)] if count and count > 1 else None
