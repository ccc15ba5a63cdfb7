"""``tps.experimental.CentralStorageStrategy``: one copy of the variables, compute on every local device.

TensorFlow's ``CentralStorageStrategy`` keeps each variable once, on the CPU
(or the only GPU), and runs the replicas on the local GPUs; every step reads
the variables from there and sends the gradients back. On JAX the same program
is ``MirroredStrategy``'s: variables are replicated over the local devices and
kept identical by the all-reduce of their updates, so results are the same as
TensorFlow's central copy while the reads stay on each device. What maps how:

- ``compute_devices``: the replicas' devices (default: every local device);
- ``parameter_device``: where TensorFlow keeps the variables; accepted, checked
  as a device and kept as ``strategy.parameter_device``, but XLA places the
  replicated copies;
- single process only, as in TensorFlow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tpustrategy._src.devices.mesh import resolve_device
from tpustrategy._src.strategy.strategies import MirroredStrategy


class CentralStorageStrategy(MirroredStrategy):
    """Synchronous training with one logical copy of the variables (``tf.distribute.experimental.CentralStorageStrategy``).

    Args:
      compute_devices: devices of the replicas (``jax.Device`` or ``"/gpu:0"``
        style strings); default every local device.
      parameter_device: TensorFlow's variable device (default: the CPU or the
        only compute device); validated, then informational: variables are
        replicated over ``compute_devices`` (see the module docstring).

    Example:
      >>> strategy = tps.experimental.CentralStorageStrategy()
      >>> with strategy.scope():
      ...     w = tps.Variable(jnp.zeros(4))   # one value, the same on every replica
    """

    def __init__(self, compute_devices: Sequence[Any] | None = None, parameter_device: Any = None):
        import jax

        if jax.process_count() > 1:
            raise ValueError(
                "CentralStorageStrategy: this job has "
                f"{jax.process_count()} processes, and CentralStorageStrategy (as in TensorFlow) "
                "runs in one process only.\nFix: use tps.MultiWorkerMirroredStrategy() for a job "
                "of several processes.")
        super().__init__(devices=compute_devices)
        if parameter_device is None:  # TensorFlow: the only compute device, else the CPU
            parameter_device = self._local_devices[0] if len(self._local_devices) == 1 else _cpu()
        else:
            parameter_device = resolve_device(parameter_device, "CentralStorageStrategy")
        self._parameter_device = parameter_device

    @property
    def parameter_device(self) -> Any:
        """The device TensorFlow would keep the variables on."""
        return self._parameter_device


def _cpu() -> Any:
    import jax

    return jax.local_devices(backend="cpu")[0]
