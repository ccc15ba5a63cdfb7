"""tpustrategy: TensorFlow's TPUStrategy programming model on JAX/XLA.

``import tpustrategy as tps`` gives the ``tf.distribute`` surface;
``import tpustrategy.data as tpsd`` gives the ``tf.data`` surface.
"""

from tpustrategy import config as config
from tpustrategy import errors as errors
from tpustrategy._src.function import function as function
from tpustrategy._src.reduce_op import ReduceOp as ReduceOp
from tpustrategy._src.replica.context import ReplicaContext as ReplicaContext
from tpustrategy._src.strategy.base import Strategy as Strategy
from tpustrategy._src.strategy.base import ValueContext as ValueContext
from tpustrategy._src.strategy.context import get_replica_context as get_replica_context
from tpustrategy._src.strategy.context import get_strategy as get_strategy
from tpustrategy._src.strategy.context import has_strategy as has_strategy
from tpustrategy._src.strategy.context import in_cross_replica_context as in_cross_replica_context
from tpustrategy._src.strategy.strategies import MirroredStrategy as MirroredStrategy
from tpustrategy._src.strategy.strategies import (
    MultiWorkerMirroredStrategy as MultiWorkerMirroredStrategy,
)
from tpustrategy._src.strategy.strategies import OneDeviceStrategy as OneDeviceStrategy
from tpustrategy._src.strategy.strategies import TPUStrategy as TPUStrategy
from tpustrategy._src.values.distributed import DistributedValues as DistributedValues
from tpustrategy._src.values.distributed import Mirrored as Mirrored
from tpustrategy._src.values.distributed import PerReplica as PerReplica
from tpustrategy._src.variables.enums import VariableAggregation as VariableAggregation
from tpustrategy._src.variables.enums import VariableSynchronization as VariableSynchronization
from tpustrategy._src.variables.variable import Variable as Variable

__version__ = "0.1.0"
