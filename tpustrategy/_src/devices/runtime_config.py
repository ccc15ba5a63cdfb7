"""``tf.config``'s runtime settings on JAX: visible devices, memory growth, threads, determinism.

TensorFlow fixes these before its runtime starts, and raises ``RuntimeError``
when they change afterwards; JAX's counterparts are likewise read when its
backends start, so the same rule holds here:

- visible devices: hiding every GPU and/or TPU sets ``jax_platforms`` (JAX then
  starts only the backends left); a subset of one kind's devices cannot be
  chosen before JAX lists them (use ``CUDA_VISIBLE_DEVICES`` /
  ``TPU_VISIBLE_CHIPS``), and after start only the current set is accepted;
- memory growth: ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` (JAX's allocator then
  grows on demand);
- op determinism: ``--xla_gpu_deterministic_ops=true`` in ``XLA_FLAGS``;
- TF32: ``jax_default_matmul_precision`` (``"tensorfloat32"`` / ``"float32"``),
  which may change at any time;
- inter/intra-op threads and soft device placement are recorded and reported
  (XLA sizes its own thread pools; JAX places by sharding, never "softly").
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from tpustrategy._src.devices import logical

_state: dict[str, Any] = {"visible": None, "growth": {}, "inter": 0, "intra": 0, "soft": True}
_ACCELERATORS = ("GPU", "TPU")


def _started() -> bool:
    from tpustrategy._src.jax_shims import backend

    return backend.backends_started()


def _as_list(devices: Any, api: str) -> list[logical.PhysicalDevice]:
    items = [devices] if isinstance(devices, logical.PhysicalDevice) else list(devices)
    for d in items:
        if not isinstance(d, logical.PhysicalDevice):
            raise TypeError(f"tps.config.{api}: `devices` must be PhysicalDevice(s) from "
                            f"tps.config.list_physical_devices(). Received: {d!r} ({type(d).__name__}).")
    return items


def get_visible_devices(device_type: str | None = None) -> list[logical.PhysicalDevice]:
    """The physical devices the runtime uses (``tf.config.get_visible_devices``): all, unless set."""
    kind = logical._check_type(device_type, "get_visible_devices")
    visible = _state["visible"]
    if visible is None:
        return logical.list_physical_devices(kind)
    return [d for d in visible if kind is None or d.device_type == kind]


def set_visible_devices(devices: Any, device_type: str | None = None) -> None:
    """Restricts the devices the runtime uses (``tf.config.set_visible_devices``).

    Args:
      devices: a ``PhysicalDevice`` or a list of them (``[]`` hides every device of ``device_type``).
      device_type: which kind the list is for (None: every kind).

    Raises:
      RuntimeError: JAX has started and the set differs from the current one
        (TensorFlow: "Visible devices cannot be modified after being initialized").
      ValueError: the CPU is hidden, or a subset of one kind's GPUs/TPUs is asked for.
    """
    kind = logical._check_type(device_type, "set_visible_devices")
    chosen = _as_list(devices, "set_visible_devices")
    kinds = [kind] if kind else ["CPU", *_ACCELERATORS]
    for d in chosen:
        if d.device_type not in kinds:
            raise ValueError(f"tps.config.set_visible_devices: {d} is not of device_type={device_type!r}.")
    if _started():
        current = logical.list_physical_devices(kind)
        if sorted(chosen) != sorted(current):
            raise RuntimeError(
                "Visible devices cannot be modified after being initialized: JAX has started with "
                f"{current}, and {chosen} were asked for.\nFix: call tps.config.set_visible_devices before "
                "anything runs on JAX (right after the imports), or set JAX_PLATFORMS / CUDA_VISIBLE_DEVICES "
                "before starting Python.")
        _state["visible"] = logical.list_physical_devices()
        return
    if "CPU" in kinds and not any(d.device_type == "CPU" for d in chosen):
        raise ValueError("tps.config.set_visible_devices: the CPU cannot be hidden (JAX's host device).\n"
                         "Fix: keep tps.config.list_physical_devices('CPU') in the list.")
    hidden = [k for k in _ACCELERATORS if k in kinds and not any(d.device_type == k for d in chosen)]
    if any(d.device_type in _ACCELERATORS for d in chosen):
        raise ValueError(
            "tps.config.set_visible_devices: before JAX starts, GPUs and TPUs can be hidden all together "
            "(`set_visible_devices([], 'GPU')`), not chosen one by one.\nFix: set CUDA_VISIBLE_DEVICES or "
            "TPU_VISIBLE_CHIPS before starting Python to choose some of them.")
    keep = ["cpu"]
    if "TPU" not in hidden and _tpu_present():
        keep.insert(0, "tpu")
    if "GPU" not in hidden and importlib.util.find_spec("jax_cuda12_plugin") is not None:
        keep.insert(0, "cuda")
    import jax

    jax.config.update("jax_platforms", ",".join(keep))
    _state["visible"] = [logical.PhysicalDevice("/physical_device:CPU:0", "CPU")]


def _tpu_present() -> bool:
    from tpustrategy._src.jax_shims import backend

    return backend.tpu_chips_attached() > 0


def _physical(device: Any, api: str) -> logical.PhysicalDevice:
    if not isinstance(device, logical.PhysicalDevice):
        raise TypeError(f"tps.config.experimental.{api}: `device` must be a PhysicalDevice from "
                        f"tps.config.list_physical_devices(). Received: {device!r}.")
    return device


def set_memory_growth(device: Any, enable: bool) -> None:
    """Grows the device's memory on demand instead of reserving most of it (``XLA_PYTHON_CLIENT_PREALLOCATE``).

    Raises:
      ValueError: a CPU device (TensorFlow: "Cannot set memory growth on non-GPU devices").
      RuntimeError: JAX has started with another setting.
    """
    device = _physical(device, "set_memory_growth")
    if device.device_type != "GPU":
        raise ValueError(f"Cannot set memory growth on non-GPU devices (tps.config.experimental.set_memory_growth: "
                         f"received {device}).")
    enable = bool(enable)
    if _started():
        if enable == (os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true").lower() == "false"):
            _state["growth"][device.name] = enable
            return
        raise RuntimeError(
            "Physical devices cannot be modified after being initialized: JAX's GPU allocator has started.\n"
            "Fix: call tps.config.experimental.set_memory_growth right after the imports, or set "
            "XLA_PYTHON_CLIENT_PREALLOCATE=false before starting Python.")
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false" if enable else "true"
    _state["growth"][device.name] = enable


def get_memory_growth(device: Any) -> bool:
    """Whether memory growth is on for ``device``."""
    device = _physical(device, "get_memory_growth")
    default = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true").lower() == "false"
    return bool(_state["growth"].get(device.name, default))


def _jax_device(name: str, api: str) -> Any:
    import jax

    text = name.split("device:")[-1] if "device:" in name else name
    kind, _, index = text.rpartition(":")
    kinds = {"CPU": "cpu", "GPU": "gpu", "TPU": "tpu"}
    if kind.upper() not in kinds or not index.isdigit():
        raise ValueError(f"tps.config.experimental.{api}: `device` must name a device like 'GPU:0'. "
                         f"Received: {name!r}.")
    devices = jax.local_devices(backend=kinds[kind.upper()])
    if int(index) >= len(devices):
        raise ValueError(f"tps.config.experimental.{api}: no device {name!r}; this host has {len(devices)} "
                         f"{kind.upper()} device(s).")
    return devices[int(index)]


def get_memory_info(device: str) -> dict[str, int]:
    """``{"current": bytes in use, "peak": peak bytes}`` of a device (``'GPU:0'``), from JAX's memory stats.

    Raises:
      ValueError: the device keeps no memory statistics (CPU), as TensorFlow.
    """
    stats = _jax_device(device, "get_memory_info").memory_stats()
    if not stats:
        raise ValueError(f"get_memory_info is not supported for device {device!r}: its runtime keeps no memory "
                         "statistics (JAX reports them for GPU and TPU).")
    return {"current": int(stats.get("bytes_in_use", 0)), "peak": int(stats.get("peak_bytes_in_use", 0))}


def get_memory_usage(device: str) -> int:
    """Bytes in use on a device (TensorFlow's deprecated form of ``get_memory_info(d)["current"]``)."""
    return get_memory_info(device)["current"]


def get_device_details(device: Any) -> dict[str, Any]:
    """``{"device_name": ..., "compute_capability": (major, minor)}`` of a GPU; ``{}`` for other devices."""
    device = _physical(device, "get_device_details")
    if device.device_type != "GPU":
        return {}
    jax_device = _jax_device(device.name, "get_device_details")
    details: dict[str, Any] = {"device_name": jax_device.device_kind}
    capability = getattr(jax_device, "compute_capability", None)
    if capability:
        major, _, minor = str(capability).partition(".")
        details["compute_capability"] = (int(major), int(minor or 0))
    return details


def enable_op_determinism() -> None:
    """Makes GPU reductions deterministic (``--xla_gpu_deterministic_ops=true``); before JAX starts."""
    flag = "--xla_gpu_deterministic_ops=true"
    flags = os.environ.get("XLA_FLAGS", "")
    if flag in flags:
        return
    if _started():
        raise RuntimeError(
            "tps.config.experimental.enable_op_determinism: JAX has started, and XLA reads its flags at start.\n"
            "Fix: call it right after the imports, or set XLA_FLAGS=--xla_gpu_deterministic_ops=true before "
            "starting Python.")
    os.environ["XLA_FLAGS"] = (flags + " " + flag).strip()


def tensor_float_32_execution_enabled() -> bool:
    """Whether float32 matmuls may use TF32 (JAX's ``jax_default_matmul_precision`` is not float32)."""
    import jax

    return jax.config.jax_default_matmul_precision not in ("float32", "highest")


def enable_tensor_float_32_execution(enabled: bool) -> None:
    """Lets float32 matmuls use TF32 (``True``) or keeps them in full float32 (``False``)."""
    import jax

    jax.config.update("jax_default_matmul_precision", "tensorfloat32" if enabled else "float32")


def get_soft_device_placement() -> bool:
    """The soft-placement setting (recorded; JAX places by sharding, so it changes nothing)."""
    return bool(_state["soft"])


def set_soft_device_placement(enabled: bool) -> None:
    """Records the soft-placement setting (TensorFlow's fallback to CPU for ops a device lacks)."""
    _state["soft"] = bool(enabled)


def _threads(key: str, value: Any, api: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"tps.config.threading.{api}: `num_threads` must be an int >= 0 (0: the system "
                         f"picks). Received: {value!r}.")
    if _started() and value != _state[key]:
        raise RuntimeError(
            f"tps.config.threading.{api}: cannot be modified after initialization (JAX has started).\n"
            "Fix: call it right after the imports.")
    _state[key] = value


def get_inter_op_parallelism_threads() -> int:
    """Threads for running independent ops (0: the system picks; XLA sizes its own pools)."""
    return int(_state["inter"])


def set_inter_op_parallelism_threads(num_threads: int) -> None:
    """Records the inter-op thread count (before JAX starts; XLA sizes its own pools)."""
    _threads("inter", num_threads, "set_inter_op_parallelism_threads")


def get_intra_op_parallelism_threads() -> int:
    """Threads inside one op (0: the system picks)."""
    return int(_state["intra"])


def set_intra_op_parallelism_threads(num_threads: int) -> None:
    """Records the intra-op thread count (before JAX starts; XLA sizes its own pools)."""
    _threads("intra", num_threads, "set_intra_op_parallelism_threads")
