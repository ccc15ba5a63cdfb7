"""``tf.distribute.experimental`` counterparts (``tps.experimental``).

Names are loaded on first use so importing this package does not start JAX.
"""

from __future__ import annotations

from tpustrategy._src.lazy import loader

_LAZY: dict[str, tuple[str, str]] = {
    "PreemptionCheckpointHandler": ("tpustrategy._src.checkpoint.preemption", "PreemptionCheckpointHandler"),
    "TerminationConfig": ("tpustrategy._src.checkpoint.preemption", "TerminationConfig"),
    "CommunicationOptions": ("tpustrategy._src.strategy.communication", "CommunicationOptions"),
    "CommunicationImplementation": ("tpustrategy._src.strategy.communication", "CommunicationImplementation"),
    "CentralStorageStrategy": ("tpustrategy._src.strategy.central_storage", "CentralStorageStrategy"),
}


__getattr__, __dir__ = loader(__name__, _LAZY)
