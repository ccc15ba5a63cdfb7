"""Facts about this process's JAX backend that must be known without starting it.

``xla_bridge.backends_are_initialized()`` says whether JAX already created its
backends (after which a process can no longer join a multi-process job, or
change its device count); ``hardware_utils.num_available_tpu_chips_and_device_id()``
counts the TPU chips attached to this host from ``/sys`` without starting
anything. Neither has a public equivalent in JAX 0.10: ``jax.devices()`` answers
both questions but starts the backend, which is exactly what these callers must
not do. When a private name moves, ``check()`` raises and ``tests/jax_shims`` fails.
"""

from __future__ import annotations

from tpustrategy._src.jax_shims import supported


def check() -> None:
    """Raises ``RuntimeError`` when the private names this module reads are gone."""
    from jax._src import hardware_utils, xla_bridge

    for module, name in ((xla_bridge, "backends_are_initialized"),
                         (hardware_utils, "num_available_tpu_chips_and_device_id")):
        if not callable(getattr(module, name, None)):
            raise RuntimeError(
                f"tpustrategy: {module.__name__}.{name} moved in this JAX version.\n"
                + supported.FIX)


def backends_started() -> bool:
    """Whether JAX created its backends in this process (public stand-in: none that does not start them)."""
    from jax._src import xla_bridge

    return bool(xla_bridge.backends_are_initialized())


def tpu_chips_attached() -> int:
    """How many TPU chips this host has, read from the system without starting JAX.

    Falls back to looking for TPU device files when the private helper is gone
    (it is only used to decide whether ``"local"`` TPUs exist).
    """
    try:
        from jax._src import hardware_utils

        return int(hardware_utils.num_available_tpu_chips_and_device_id()[0])
    except Exception:  # noqa: BLE001 - a private helper; the device files answer the same
        import glob

        return len(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))
