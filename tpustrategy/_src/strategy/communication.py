"""Collective-communication choices TensorFlow users pass (accepted; XLA chooses the algorithm).

``tf.distribute.experimental.CommunicationOptions`` / ``CommunicationImplementation``
and the cross-device-ops classes given to ``MirroredStrategy(cross_device_ops=...)``
(``HierarchicalCopyAllReduce``, ``NcclAllReduce``, ``ReductionToOneDevice``) choose
how TensorFlow implements an all-reduce. On JAX the collective is an XLA op and
XLA picks its implementation for the platform, so these are validated, kept on
the strategy, and logged once. The results are the same: ``ReductionToOneDevice``
sums in the same order-independent way as every other choice here.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from typing import Any

import jax
import jax.numpy as jnp

from tpustrategy._src.context import contracts
from tpustrategy._src.devices.mesh import resolve_device
from tpustrategy._src.reduce_op import ReduceOp, canonical_reduce_op
from tpustrategy._src.values.distributed import DistributedValues, Mirrored

logger = logging.getLogger("tpustrategy")
_logged: set[str] = set()


class CommunicationImplementation(enum.Enum):
    """``tf.distribute.experimental.CommunicationImplementation``."""

    AUTO = "AUTO"
    RING = "RING"
    NCCL = "NCCL"


@dataclasses.dataclass(frozen=True)
class CommunicationOptions:
    """``tf.distribute.experimental.CommunicationOptions``.

    Args:
      bytes_per_pack: split large all-reduces into packs of this many bytes (0: no
        splitting). Accepted; XLA combines collectives itself.
      timeout_seconds: give up on a collective after this long (None: no limit).
        Multi-host jobs bound their waits with ``tps.initialize(collective_timeout=...)``.
      implementation: a ``CommunicationImplementation``.
    """

    bytes_per_pack: int = 0
    timeout_seconds: float | None = None
    implementation: CommunicationImplementation = CommunicationImplementation.AUTO

    def __post_init__(self) -> None:
        if isinstance(self.bytes_per_pack, bool) or not isinstance(self.bytes_per_pack, int) or self.bytes_per_pack < 0:
            raise ValueError(
                "CommunicationOptions: `bytes_per_pack` must be a non-negative int. "
                f"Received: bytes_per_pack={self.bytes_per_pack!r}."
            )
        if self.timeout_seconds is not None and not (
                isinstance(self.timeout_seconds, (int, float)) and self.timeout_seconds > 0):
            raise ValueError(
                "CommunicationOptions: `timeout_seconds` must be None or a positive number. "
                f"Received: timeout_seconds={self.timeout_seconds!r}."
            )
        implementation = self.implementation
        if isinstance(implementation, str):
            try:
                implementation = CommunicationImplementation[implementation.upper()]
            except KeyError:
                implementation = None
        if not isinstance(implementation, CommunicationImplementation):
            raise ValueError(
                "CommunicationOptions: `implementation` must be a CommunicationImplementation "
                f"(AUTO, RING or NCCL). Received: implementation={self.implementation!r}.\nFix: pass "
                "tps.experimental.CommunicationImplementation.AUTO (XLA chooses the algorithm either way)."
            )
        object.__setattr__(self, "implementation", implementation)


class CrossDeviceOps:
    """Base of the cross-device-ops choices (``tf.distribute.CrossDeviceOps``)."""

    def __init__(self) -> None:
        self._description = type(self).__name__

    def __repr__(self) -> str:
        return f"tps.{self._description}"

    # TensorFlow's public methods: every choice computes the same order-independent result.
    def reduce(self, reduce_op: Any, per_replica_value: Any, destinations: Any, options: Any = None) -> Any:
        """Reduces the components of ``per_replica_value`` onto ``destinations``.

        Args:
          reduce_op: ``ReduceOp.SUM``/``MEAN`` or its name.
          per_replica_value: a ``PerReplica``/``Mirrored`` (or a plain value: one component).
          destinations: a device (string or ``jax.Device``), a value on one device, or a
            distributed value or variable (the devices of its components).
          options: a ``tps.experimental.CommunicationOptions`` (accepted).

        Returns:
          A plain array on one destination device, else a ``Mirrored`` with one
          component on each destination device (TensorFlow unwraps one component too).
        """
        op = canonical_reduce_op(reduce_op)
        parts = _components(per_replica_value)
        devices = _destination_devices(destinations, f"{self._description}.reduce")
        total = jax.device_put(parts[0], devices[0])
        for part in parts[1:]:
            total = total + jax.device_put(part, devices[0])
        if op == ReduceOp.MEAN:
            total = total / len(parts)
        return _place(total, devices)

    def batch_reduce(self, reduce_op: Any, value_destination_pairs: Any, options: Any = None) -> list[Any]:
        """``reduce`` of each ``(per_replica_value, destinations)`` pair, in order."""
        pairs = list(value_destination_pairs)
        for i, pair in enumerate(pairs):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise ValueError(
                    f"{self._description}.batch_reduce: value_destination_pairs[{i}] must be a "
                    f"(value, destinations) pair. Received: {pair!r}."
                )
        return [self.reduce(reduce_op, v, d, options) for v, d in pairs]

    def broadcast(self, tensor: Any, destinations: Any) -> Any:
        """``tensor`` on every destination device (a ``Mirrored``; plain for one device)."""
        return _place(jnp.asarray(tensor), _destination_devices(destinations, f"{self._description}.broadcast"))


class ReductionToOneDevice(CrossDeviceOps):
    """``tf.distribute.ReductionToOneDevice``: accepted; the reduction's result is identical.

    Args:
      reduce_to_device: the device TensorFlow would reduce on (ignored).
      accumulation_fn: TensorFlow's accumulation function (must be None or
        a sum such as ``tf.math.add_n``; others are refused, since XLA's sum is used).
    """

    def __init__(self, reduce_to_device: Any = None, accumulation_fn: Any = None):
        super().__init__()
        if accumulation_fn is not None and getattr(accumulation_fn, "__name__", "") not in ("add_n", "sum"):
            raise ValueError(
                "ReductionToOneDevice: `accumulation_fn` must be None (a sum); XLA performs the "
                f"reduction. Received: accumulation_fn={accumulation_fn!r}."
            )
        self.reduce_to_device = reduce_to_device


class _AllReduce(CrossDeviceOps):
    def __init__(self, num_packs: int = 1):
        super().__init__()
        if isinstance(num_packs, bool) or not isinstance(num_packs, int) or num_packs < 0:
            raise ValueError(
                f"{type(self).__name__}: `num_packs` must be a non-negative int. Received: num_packs={num_packs!r}."
            )
        self.num_packs = num_packs


class HierarchicalCopyAllReduce(_AllReduce):
    """``tf.distribute.HierarchicalCopyAllReduce``: accepted; XLA chooses the all-reduce."""


class NcclAllReduce(_AllReduce):
    """``tf.distribute.NcclAllReduce``: accepted; XLA chooses the all-reduce."""


def check_cross_device_ops(value: Any, api: str) -> Any:
    """Validates ``cross_device_ops`` and logs once that XLA chooses the all-reduce."""
    if value is None:
        return None
    if not isinstance(value, CrossDeviceOps):
        raise TypeError(
            f"{api}: `cross_device_ops` must be a tps.CrossDeviceOps instance "
            "(tps.HierarchicalCopyAllReduce(), tps.NcclAllReduce() or tps.ReductionToOneDevice()) or None. "
            f"Received: {value!r} ({type(value).__name__})."
        )
    _log_once(type(value).__name__)
    return value


def check_communication_options(value: Any, api: str) -> CommunicationOptions:
    if value is None:
        return CommunicationOptions()
    if not isinstance(value, CommunicationOptions):
        raise TypeError(
            f"{api}: `communication_options` must be a tps.experimental.CommunicationOptions. "
            f"Received: {value!r} ({type(value).__name__})."
        )
    if value.implementation is not CommunicationImplementation.AUTO:
        _log_once(f"CommunicationImplementation.{value.implementation.name}")
    return value


def _log_once(choice: str) -> None:
    if choice not in _logged:
        _logged.add(choice)
        logger.info("tpustrategy: %s accepted; XLA chooses the all-reduce implementation.", choice)


def _components(value: Any) -> list[Any]:
    if isinstance(value, DistributedValues):
        return [jnp.asarray(v) for v in value.values]
    values = getattr(value, "values", None)  # a distributed variable: its local components
    if contracts.is_distributed_variable(value) and values is not None:
        return [jnp.asarray(v.read_value()) for v in values]
    return [jnp.asarray(value)]


def _device_of(value: Any) -> Any:
    device = getattr(value, "device", None)
    if isinstance(device, jax.Device):
        return device
    if isinstance(value, jax.Array):
        return next(iter(value.devices()))
    return jax.devices()[0]


def _destination_devices(destinations: Any, api: str) -> tuple[Any, ...]:
    if isinstance(destinations, (str, jax.Device)):
        return (resolve_device(destinations, api),)
    if isinstance(destinations, DistributedValues):
        return tuple(_device_of(v) for v in destinations.values)
    if contracts.is_distributed_variable(destinations):
        return tuple(_device_of(v) for v in destinations.values)
    if destinations is None:
        raise ValueError(
            f"{api}: `destinations` must be a device, a value or a distributed value. Received: None.\n"
            "Fix: pass a device string such as '/cpu:0', or the variable the result is for."
        )
    return (_device_of(destinations),)


def _place(value: Any, devices: tuple[Any, ...]) -> Any:
    if len(devices) == 1:
        return jax.device_put(value, devices[0])
    return Mirrored(tuple(jax.device_put(value, d) for d in devices))
