"""``tf.distribute.experimental`` counterparts (``tps.experimental``).

Names are loaded on first use so importing this package does not start JAX.
"""

# No `from __future__ import annotations` here: it would bind `annotations` as a public name.
from tpustrategy._src.lazy import loader as _loader

_LAZY: dict[str, tuple[str, str]] = {
    "PreemptionCheckpointHandler": ("tpustrategy._src.checkpoint.preemption", "PreemptionCheckpointHandler"),
    "TerminationConfig": ("tpustrategy._src.checkpoint.preemption", "TerminationConfig"),
    "CommunicationOptions": ("tpustrategy._src.strategy.communication", "CommunicationOptions"),
    "CommunicationImplementation": ("tpustrategy._src.strategy.communication", "CommunicationImplementation"),
    "CentralStorageStrategy": ("tpustrategy._src.strategy.central_storage", "CentralStorageStrategy"),
    "MultiWorkerMirroredStrategy": ("tpustrategy._src.strategy.strategies", "MultiWorkerMirroredStrategy"),
    "PreemptionWatcher": ("tpustrategy._src.cluster.preemption_watcher", "PreemptionWatcher"),
    "TPUStrategy": ("tpustrategy._src.strategy.strategies", "TPUStrategy"),
    "ValueContext": ("tpustrategy._src.strategy.base", "ValueContext"),
}


__getattr__, __dir__ = _loader(__name__, _LAZY)
