"""tpustrategy: TensorFlow's TPUStrategy programming model on JAX/XLA.

``import tpustrategy as tps`` gives the ``tf.distribute`` surface;
``import tpustrategy.data as tpsd`` gives the ``tf.data`` surface.

The names below are loaded on first use, so ``import tpustrategy.data``
(which imports this package first) does not start JAX.
"""

# No `from __future__ import annotations` here: it would bind `annotations` as a public name.
from typing import TYPE_CHECKING as _TYPE_CHECKING

from tpustrategy._src.lazy import loader as _loader

__version__ = "0.1.0"

_LAZY: dict[str, tuple[str, str]] = {
    "CrossDeviceOps": ("tpustrategy._src.strategy.communication", "CrossDeviceOps"),
    "DistributedDataset": ("tpustrategy._src.input.interfaces", "DistributedDataset"),
    "DistributedIterator": ("tpustrategy._src.input.interfaces", "DistributedIterator"),
    "DistributedValues": ("tpustrategy._src.values.distributed", "DistributedValues"),
    "HierarchicalCopyAllReduce": ("tpustrategy._src.strategy.communication", "HierarchicalCopyAllReduce"),
    "NcclAllReduce": ("tpustrategy._src.strategy.communication", "NcclAllReduce"),
    "ReductionToOneDevice": ("tpustrategy._src.strategy.communication", "ReductionToOneDevice"),
    "RunOptions": ("tpustrategy._src.strategy.run_options", "RunOptions"),
    "InputContext": ("tpustrategy._src.input.input_context", "InputContext"),
    "InputOptions": ("tpustrategy._src.input.input_context", "InputOptions"),
    "InputReplicationMode": ("tpustrategy._src.input.input_context", "InputReplicationMode"),
    "Mirrored": ("tpustrategy._src.values.distributed", "Mirrored"),
    "MirroredStrategy": ("tpustrategy._src.strategy.strategies", "MirroredStrategy"),
    "MultiWorkerMirroredStrategy": ("tpustrategy._src.strategy.strategies", "MultiWorkerMirroredStrategy"),
    "OneDeviceStrategy": ("tpustrategy._src.strategy.strategies", "OneDeviceStrategy"),
    "PerReplica": ("tpustrategy._src.values.distributed", "PerReplica"),
    "ReduceOp": ("tpustrategy._src.reduce_op", "ReduceOp"),
    "ReplicaContext": ("tpustrategy._src.replica.context", "ReplicaContext"),
    "Strategy": ("tpustrategy._src.strategy.base", "Strategy"),
    "StrategyExtended": ("tpustrategy._src.strategy.extended", "StrategyExtended"),
    "TPUStrategy": ("tpustrategy._src.strategy.strategies", "TPUStrategy"),
    "ValueContext": ("tpustrategy._src.strategy.base", "ValueContext"),
    "Variable": ("tpustrategy._src.variables.variable", "Variable"),
    "IndexedSlices": ("tpustrategy._src.variables.indexed_slices", "IndexedSlices"),
    "VariableAggregation": ("tpustrategy._src.variables.enums", "VariableAggregation"),
    "VariableSynchronization": ("tpustrategy._src.variables.enums", "VariableSynchronization"),
    "GradientTape": ("tpustrategy._src.tape.tape", "GradientTape"),
    "UnconnectedGradients": ("tpustrategy._src.tape.tape", "UnconnectedGradients"),
    "function": ("tpustrategy._src.function", "function"),
    "experimental_set_strategy": ("tpustrategy._src.strategy.context", "experimental_set_strategy"),
    "get_replica_context": ("tpustrategy._src.strategy.context", "get_replica_context"),
    "get_strategy": ("tpustrategy._src.strategy.context", "get_strategy"),
    "has_strategy": ("tpustrategy._src.strategy.context", "has_strategy"),
    "in_cross_replica_context": ("tpustrategy._src.strategy.context", "in_cross_replica_context"),
    "initialize": ("tpustrategy._src.cluster.initialize", "initialize"),
}
_SUBMODULES = ("config", "errors", "data", "testing", "nn", "tpu", "cluster_resolver", "experimental", "metrics", "optimizers", "train", "lookup", "io", "image", "strings",
               "sparse")


__getattr__, __dir__ = _loader(__name__, _LAZY, _SUBMODULES)


if _TYPE_CHECKING:  # the same names, for type checkers and IDEs
    from tpustrategy._src.cluster.initialize import initialize as initialize
    from tpustrategy._src.function import function as function
    from tpustrategy._src.input.input_context import InputContext as InputContext
    from tpustrategy._src.input.input_context import InputOptions as InputOptions
    from tpustrategy._src.input.input_context import InputReplicationMode as InputReplicationMode
    from tpustrategy._src.input.interfaces import DistributedDataset as DistributedDataset
    from tpustrategy._src.input.interfaces import DistributedIterator as DistributedIterator
    from tpustrategy._src.reduce_op import ReduceOp as ReduceOp
    from tpustrategy._src.replica.context import ReplicaContext as ReplicaContext
    from tpustrategy._src.strategy.base import Strategy as Strategy
    from tpustrategy._src.strategy.base import ValueContext as ValueContext
    from tpustrategy._src.strategy.communication import CrossDeviceOps as CrossDeviceOps
    from tpustrategy._src.strategy.communication import (
        HierarchicalCopyAllReduce as HierarchicalCopyAllReduce,
    )
    from tpustrategy._src.strategy.communication import NcclAllReduce as NcclAllReduce
    from tpustrategy._src.strategy.communication import ReductionToOneDevice as ReductionToOneDevice
    from tpustrategy._src.strategy.context import (
        experimental_set_strategy as experimental_set_strategy,
    )
    from tpustrategy._src.strategy.context import get_replica_context as get_replica_context
    from tpustrategy._src.strategy.context import get_strategy as get_strategy
    from tpustrategy._src.strategy.context import has_strategy as has_strategy
    from tpustrategy._src.strategy.context import (
        in_cross_replica_context as in_cross_replica_context,
    )
    from tpustrategy._src.strategy.extended import StrategyExtended as StrategyExtended
    from tpustrategy._src.strategy.run_options import RunOptions as RunOptions
    from tpustrategy._src.strategy.strategies import MirroredStrategy as MirroredStrategy
    from tpustrategy._src.strategy.strategies import (
        MultiWorkerMirroredStrategy as MultiWorkerMirroredStrategy,
    )
    from tpustrategy._src.strategy.strategies import OneDeviceStrategy as OneDeviceStrategy
    from tpustrategy._src.strategy.strategies import TPUStrategy as TPUStrategy
    from tpustrategy._src.tape.tape import GradientTape as GradientTape
    from tpustrategy._src.tape.tape import UnconnectedGradients as UnconnectedGradients
    from tpustrategy._src.values.distributed import DistributedValues as DistributedValues
    from tpustrategy._src.values.distributed import Mirrored as Mirrored
    from tpustrategy._src.values.distributed import PerReplica as PerReplica
    from tpustrategy._src.variables.enums import VariableAggregation as VariableAggregation
    from tpustrategy._src.variables.enums import VariableSynchronization as VariableSynchronization
    from tpustrategy._src.variables.indexed_slices import IndexedSlices as IndexedSlices
    from tpustrategy._src.variables.variable import Variable as Variable
